package tcp

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

var (
	_ transport.Starter    = (*Transport)(nil)
	_ transport.Withdrawer = (*Transport)(nil)
)

// sender is TrySend's and writeNow's scratch for the one writev they
// make, reused so that they allocate nothing. It is guarded by
// peer.sendMu.
type sender struct {
	hdr    [headerSize]byte
	iov    [2][]byte
	writev func(fd uintptr) // built once
	n      int              // what writev returned
	werr   error
}

func (s *sender) init() { s.writev = s.writevOn }

// writevOn is writeNow's callback inside RawConn.Control.
func (s *sender) writevOn(fd uintptr) {
	for {
		n, e := rawWritev(int(fd), s.iov[:])
		if e != unix.EINTR {
			s.n, s.werr = n, nil
			if e != 0 {
				s.werr = e
			}
			return
		}
	}
}

// Send writes one message to peer and returns once payload may be reused.
// h.Len must equal len(payload). Sends to one peer are serialised and
// arrive in order, after the messages started before. Cancelling ctx takes
// back a message not yet begun; one whose frame is partly written is
// finished from a copy of the rest, and Send returns nil: the message
// arrives, and the link stays up.
func (t *Transport) Send(ctx context.Context, peer int, h transport.Header, payload []byte) error {
	p, err := t.check(peer, h, payload)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := p.rd.Load()
	if r == nil {
		if _, err := p.connect(ctx); err != nil {
			return err
		}
		if r = p.rd.Load(); r == nil {
			return p.failed.Load().err // connect returns a link that is up or lost
		}
	}
	o := newOutgoing(h, payload)
	o.send = true
	switch n := p.tryWrite(r, h, payload); {
	case n == o.total:
		o.recycle()
		return nil
	case n > 0: // p.sendMu is held
		o.skip(n)
		p.pushFront(o)
		p.unlockSend()
		p.kick()
	default:
		p.enqueue(r, o)
	}
	var res error
	select {
	case res = <-o.wait:
	case <-ctx.Done():
		p.withdraw(func(x *outgoing) bool { return x == o }, ctx.Err())
		res = <-o.wait
	}
	o.recycle()
	return res
}

// StartSend implements transport.Starter: it queues the message behind
// those already queued for peer, writes what the socket takes at once,
// and leaves the rest to whoever polls or to the peer's writer goroutine;
// done is told when the whole frame is written. It declines (false, nil)
// what Send would reject, and before the link is up.
func (t *Transport) StartSend(peer int, h transport.Header, payload []byte, done transport.Done) (bool, error) {
	p, err := t.check(peer, h, payload)
	if err != nil || p.failed.Load() != nil {
		return false, nil
	}
	r := p.rd.Load()
	if r == nil {
		return false, nil
	}
	o := newOutgoing(h, payload)
	o.done = done
	p.enqueue(r, o)
	return true, nil
}

// Withdraw implements transport.Withdrawer: a started send still queued
// whole is taken back and the link stays; one partly written is finished
// from a copy and completes as sent (see Send), and Withdraw reports false,
// as it does once the frame is written.
func (t *Transport) Withdraw(peer int, done transport.Done, cause error) bool {
	p, err := t.peer(peer)
	if err != nil {
		return false
	}
	return p.withdraw(func(o *outgoing) bool { return !o.send && o.done == done }, cause)
}

// tryWrite writes the frame h, payload on the calling goroutine when no
// other goroutine is writing to peer and nothing is queued for it, with one
// non-blocking writev, and returns how many bytes went out. When it wrote
// part of the frame (0 < n < the frame's length) it returns holding
// p.sendMu, for the caller to queue the rest at the head; otherwise it
// has released it.
func (p *peer) tryWrite(r *reader, h transport.Header, payload []byte) int {
	if !p.sendMu.TryLock() {
		return 0
	}
	n := p.writeNow(r, h, payload)
	if n <= 0 || n == headerSize+len(payload) {
		p.unlockSend()
	}
	return n
}

// check returns the peer of a send, or why it cannot be made.
func (t *Transport) check(peer int, h transport.Header, payload []byte) (*peer, error) {
	p, err := t.peer(peer)
	if err != nil {
		return nil, err
	}
	if h.Len != len(payload) {
		return nil, fmt.Errorf("tcp: send to rank %d: header says %d bytes, payload has %d", peer, h.Len, len(payload))
	}
	if t.closed.Load() {
		return nil, p.closedErr
	}
	if !t.started.Load() {
		return nil, fmt.Errorf("tcp: send to rank %d before Start", peer)
	}
	if f := p.failed.Load(); f != nil {
		return nil, f.err
	}
	return p, nil
}
