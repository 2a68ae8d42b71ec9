package shm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// cancelPoll bounds how long a Send waiting for space sleeps between looks
// at a cancellable context.
const cancelPoll = 20 * time.Millisecond

// Send writes one message to peer, a rank of this host, and returns once
// payload may be reused: the message is in the peer's ring, or (when larger
// than the ring) streamed through it. h.Len must equal len(payload). Sends
// to one peer are serialised and arrive in order. It first waits, within
// ctx, for the peer's segment if the peer has not started yet. Cancelling
// ctx interrupts a Send that waits for space; if part of the message had
// already gone out, the link is dropped and the peer reported lost, since
// the ring can no longer be framed.
func (t *Transport) Send(ctx context.Context, peer int, h transport.Header, payload []byte) error {
	p, err := t.peer(peer)
	if err != nil {
		return err
	}
	if h.Len != len(payload) {
		return fmt.Errorf("shm: send to rank %d: header says %d bytes, payload has %d", peer, h.Len, len(payload))
	}
	if t.closing.Load() {
		return p.closedErr
	}
	if !t.started.Load() {
		return fmt.Errorf("shm: send to rank %d before Start", peer)
	}
	if err := p.failed(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.seg.Load() == nil {
		select {
		case <-p.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := p.failed(); err != nil {
			return err
		}
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.send(ctx, h, payload)
}

// TrySend implements transport.TrySender: a message whose whole frame
// (and the terminator after it) fits in a quarter of the ring, and in the room the ring has now, is
// written at once; anything else is left to Send.
func (t *Transport) TrySend(peer int, h transport.Header, payload []byte) (bool, error) {
	p, err := t.peer(peer)
	if err != nil || h.Len != len(payload) || t.closing.Load() || !t.started.Load() || p.seg.Load() == nil {
		return false, nil
	}
	total := frameSize(len(payload)) + markerSize
	if uint64(total) > p.out.r.size()/4 || !p.sendMu.TryLock() {
		return false, nil
	}
	defer p.sendMu.Unlock()
	if p.sendClosed || p.sendable() != nil || p.out.busy() || !p.out.fits(total-markerSize) {
		return false, nil
	}
	p.out.begin(h, payload)
	if _, done, err := p.out.step(); err != nil || !done {
		if err == nil {
			err = errors.New("a frame that fitted was not written whole")
		}
		return true, p.breakOut(err)
	}
	p.seg.Load().ringBell()
	return true, nil
}

// send moves one message to the peer: by single copy when it is large
// enough and the peer can read our memory, else framed through the ring.
// p.sendMu is held.
func (p *peer) send(ctx context.Context, h transport.Header, payload []byte) error {
	if p.sendClosed {
		return p.closedErr
	}
	if err := p.sendable(); err != nil {
		return err
	}
	if n := p.t.cfg.singleCopy; n > 0 && len(payload) >= n && p.out.r.c.noCopy.Load() == 0 {
		if sent, err := p.sendSingle(ctx, h, payload); sent || err != nil {
			return err
		}
	}
	p.out.begin(h, payload)
	return p.write(ctx)
}

// write moves the frame begun on p.out into the peer's ring, waiting for
// space as needed.
func (p *peer) write(ctx context.Context) error {
	s := p.seg.Load()
	spins := 0
	for {
		wrote, done, err := p.out.step()
		if err != nil {
			return p.breakOut(err)
		}
		if wrote {
			s.ringBell()
			spins = 0
		}
		if done {
			return nil
		}
		if !wrote {
			if err := p.waitFor(ctx, &spins, -1, true); err != nil {
				if p.out.off == 0 {
					return err
				}
				return p.breakOut(err)
			}
		}
	}
}

// sendable says why the peer can take no more messages, or nil.
func (p *peer) sendable() error {
	if err := p.failed(); err != nil {
		return err
	}
	switch p.out.r.c.consState.Load() {
	case endClosed:
		return transport.Lost(p.rank, addr, errPeerClosed)
	case endBroken:
		return transport.Lost(p.rank, addr, errRefused)
	}
	return nil
}

// waitFor waits a little for the peer's consumer to move: to free ring
// space (slot < 0), or to take the offer in slot. It spins
// first, then sleeps on the ring's futex word, checking on each wake that
// the peer is still there, the transport still open and, if cancellable,
// ctx still live.
func (p *peer) waitFor(ctx context.Context, spins *int, slot int, cancellable bool) error {
	if p.t.closing.Load() {
		return p.closedErr
	}
	if err := p.sendable(); err != nil {
		return err
	}
	if cancellable {
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if *spins < p.t.cfg.spin {
		*spins++
		runtime.Gosched()
		return nil
	}
	c := p.out.r.c
	seq := c.spaceSeq.Load()
	c.spaceWait.Store(1)
	if p.moved(slot) {
		c.spaceWait.Store(0)
		return nil
	}
	d := checkEvery
	if cancellable && ctx.Done() != nil {
		d = cancelPoll
	}
	timedOut := p.w.wait(&c.spaceSeq, seq, d)
	c.spaceWait.Store(0)
	if timedOut && !p.alive() {
		return transport.Lost(p.rank, addr, errPeerDied)
	}
	return nil
}

// moved reports whether what waitFor waits for has happened.
func (p *peer) moved(slot int) bool {
	if slot < 0 {
		return p.out.room()
	}
	return p.out.r.c.slots[slot].Load() == slotTaken
}

// breakOut gives up on a half-written frame: the ring is marked broken, so
// that the peer drops us, and our receiver reports the peer lost.
func (p *peer) breakOut(cause error) error {
	p.out.r.c.prodState.Store(endBroken)
	if s := p.seg.Load(); s != nil {
		s.alarm()
	}
	if !errors.Is(cause, transport.ErrPeerLost) {
		cause = transport.Lost(p.rank, addr, fmt.Errorf(
			"send abandoned after %d of %d bytes, which leaves the ring unframed: %w", p.out.off, p.out.total, cause))
	}
	err := p.setFault(cause)
	p.out.payload = nil
	p.t.seg.alarm()
	return err
}
