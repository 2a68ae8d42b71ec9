package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

// DefaultSingleCopy is the smallest payload sent by single copy: the
// sender puts only a descriptor (the payload's address) in the ring, the
// receiver copies the payload straight from the sender's memory into the
// posted buffer with process_vm_readv (Linux's cross-memory attach, as Open
// MPI's vader uses it), and the send completes once the receiver has taken
// it. Each byte then crosses memory once instead of twice, the receivers
// of one sender copy in parallel, and a receiver copies even while its
// sender is descheduled.
//
// The kernel's copy is not free: on the 2-core VM this was measured on it
// moved cold 16 MiB at 3.5 GB/s against memmove's 7 GB/s, and pinning the
// pages cost more per byte than the ring's cache-resident second copy.
// Single copy won where one sender feeds several receivers (broadcast
// from one root at np 4, 4-16 MiB: 1.1-1.3x the bus bandwidth of
// streaming) and lost where every rank sends and receives alike (ring
// all-reduce of 256 KiB segments at np 2: 0.75x; np 4: 0.85x). Hence a
// threshold above prims' ring segments (prims.SegmentBytes): whole large
// messages go by single copy, segmented streams through the rings.
// BenchmarkStream measures the transport alone.
const DefaultSingleCopy = 512 << 10

// WithSingleCopy sets the smallest payload sent by single copy; n <= 0
// turns single copy off, so that every byte streams through the rings.
func WithSingleCopy(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = 0
		}
		c.singleCopy = n
	}
}

// processVMReadv is unix.ProcessVMReadv; tests replace it to play a
// kernel that refuses cross-memory reads.
var processVMReadv = unix.ProcessVMReadv

// Copier states: a consumer tries process_vm_readv on the producer once,
// with the first descriptor it gets, and then keeps to the answer.
const (
	copyUnknown = iota
	copyOK
	copyRefused
)

// copier reads single-copy payloads out of one producer's memory. It is
// owned by the consumer.
type copier struct {
	state  int
	pid    int
	local  [1]unix.Iovec
	remote [1]unix.RemoteIovec
	probe  [1]byte
}

// States of a ring's claim word, which keeps a cancelled Send from
// returning while the consumer reads its payload: the consumer moves it
// from claimFree to claimCopying for each copy and back; a producer whose
// Send is cancelled before its payload was taken moves it from claimFree to
// claimWithdrawn, for good, which breaks the link.
const (
	claimFree = iota
	claimCopying
	claimWithdrawn
)

// pull handles the single-copy frame whose header the consumer has read:
// it claims the ring, asks h for the destination, copies the payload into
// it from the producer's memory, publishes the frame consumed, which
// releases the producer's Send, and delivers. If this process may not read
// the producer's memory (a ptrace policy such as Yama's), it marks the
// ring noCopy and consumes the frame without delivering it; the producer
// then streams the same message through the ring (only its first
// single-copy send can meet this, and that one waits for the answer). A
// withdrawn ring breaks the link, as a half-written frame does.
func (c *consumer) pull(h transport.Handler, hdr transport.Header) error {
	c.r.read(c.head+frameHeaderSize, c.hb[frameHeaderSize:])
	addr := binary.LittleEndian.Uint64(c.hb[frameHeaderSize:])
	end := c.head + frameHeaderSize + descSize
	if !c.r.c.claim.CompareAndSwap(claimFree, claimCopying) {
		return fmt.Errorf("%w: it withdrew a single-copy send", errPeerBroke)
	}
	defer c.r.c.claim.Store(claimFree)
	if c.copier == nil {
		c.copier = &copier{}
	}
	cp := c.copier
	if cp.state == copyUnknown {
		cp.pid = int(c.r.c.prodPid.Load())
		if cp.state = cp.try(addr); cp.state == copyOK {
			c.r.c.copyOK.Store(1)
		}
	}
	if cp.state == copyRefused {
		c.r.c.noCopy.Store(1)
		c.publish(end)
		return nil
	}
	buf := h.Buffer(c.peer, hdr)
	if len(buf) != hdr.Len {
		return fmt.Errorf("the handler gave a %d-byte buffer for a %d-byte message", len(buf), hdr.Len)
	}
	if err := cp.read(buf, addr); err != nil {
		return err
	}
	c.publish(end)
	if c.taken != nil {
		c.taken()
	}
	h.Deliver(c.peer, hdr, buf)
	return nil
}

// try reads one byte at addr to learn whether this process may read the
// producer's memory.
func (cp *copier) try(addr uint64) int {
	if cp.pid <= 0 {
		return copyRefused
	}
	err := cp.read(cp.probe[:], addr)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS) {
		return copyRefused
	}
	return copyOK // any other failure shows again on the real read
}

// read copies len(dst) bytes at addr in the producer's memory into dst.
// The kernel may copy less than asked in one call; read goes on until all
// is there.
func (cp *copier) read(dst []byte, addr uint64) error {
	for done := 0; done < len(dst); {
		cp.local[0].Base = &dst[done]
		cp.local[0].SetLen(len(dst) - done)
		cp.remote[0] = unix.RemoteIovec{Base: uintptr(addr) + uintptr(done), Len: len(dst) - done}
		n, err := processVMReadv(cp.pid, cp.local[:], cp.remote[:], 0)
		if err != nil {
			return fmt.Errorf("reading a %d-byte single-copy payload from process %d: %w", len(dst), cp.pid, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: process %d gave 0 of %d single-copy bytes", errCorrupt, cp.pid, len(dst)-done)
		}
		done += n
	}
	cp.local[0].Base = nil // do not keep dst alive
	return nil
}

// sendSingle sends payload by single copy: a descriptor frame, then a wait
// until the consumer has taken the payload. It reports false, with a nil
// error, when the consumer turned out unable to read our memory; the
// caller then streams the message. The wait takes no matching receive,
// only the peer's receiver getting to the frame. Cancelling ctx withdraws
// the send unless the consumer is copying; a withdrawn send leaves the
// ring unframed, so the link is dropped, as for a streamed frame cancelled
// half-way.
//
// The payload reached Send through an interface, so it lives in the heap,
// which Go never moves; the address stays valid while we hold payload.
func (p *peer) sendSingle(ctx context.Context, h transport.Header, payload []byte) (bool, error) {
	o := &p.out
	end := o.beginSingle(h, payload)
	if err := p.write(ctx); err != nil {
		return false, err // a frame this small is written whole or not at all
	}
	defer runtime.KeepAlive(payload)
	spins, cancellable := 0, true
	for o.r.c.head.Load() < end {
		err := p.waitFor(ctx, &spins, end, cancellable)
		if err == nil {
			continue
		}
		if cancellable && ctx.Err() != nil && !errors.Is(err, transport.ErrPeerLost) {
			if o.r.c.claim.CompareAndSwap(claimFree, claimWithdrawn) {
				return false, p.breakOut(fmt.Errorf("single-copy send withdrawn: %w", err))
			}
			cancellable = false // a copy is underway: ours, or an earlier send's
			continue
		}
		return false, err
	}
	return o.r.c.noCopy.Load() == 0, nil
}

// offer is a started single-copy send (StartSend) that the consumer has
// not taken yet.
type offer struct {
	end     uint64 // where its frame ends in the ring
	payload []byte // kept alive, and unchanged by the caller, until taken
	done    transport.Done
}

// StartSend implements transport.Starter: a payload of at least the
// single-copy size, to a peer whose consumer has already read our memory,
// is offered by a descriptor in the ring at once, and done is called when
// the consumer has taken it (or the peer is lost). Sends to the peer after
// it may go out at once; the consumer takes them in order. Anything else is
// left to Send.
func (t *Transport) StartSend(peer int, h transport.Header, payload []byte, done transport.Done) (bool, error) {
	p, err := t.peer(peer)
	if err != nil || h.Len != len(payload) || t.cfg.singleCopy == 0 || len(payload) < t.cfg.singleCopy ||
		t.closing.Load() || !t.started.Load() || p.seg.Load() == nil {
		return false, nil
	}
	if !p.sendMu.TryLock() {
		return false, nil
	}
	defer p.sendMu.Unlock()
	o := &p.out
	c := o.r.c
	if p.sendClosed || p.sendable() != nil || o.busy() || c.copyOK.Load() == 0 || c.noCopy.Load() != 0 {
		return false, nil
	}
	if !o.fits(frameSize(descSize)) {
		return false, nil
	}
	// The offer is listed before the frame is published, so that whoever
	// reaps after the consumer's bell finds it.
	p.offerMu.Lock()
	end := o.beginSingle(h, payload)
	p.offers = append(p.offers, offer{end: end, payload: payload, done: done})
	t.offering.Add(1)
	_, whole, err := o.step()
	if err != nil || !whole {
		p.offers[len(p.offers)-1] = offer{} // the caller completes it
		p.offers = p.offers[:len(p.offers)-1]
		t.offering.Add(-1)
		p.offerMu.Unlock()
		if err == nil {
			err = errors.New("a descriptor that fitted was not written whole")
		}
		return true, p.breakOut(err)
	}
	p.offerMu.Unlock()
	p.seg.Load().ringBell()
	return true, nil
}

// reap completes the started sends whose payload the consumers have taken,
// and reports whether it completed any.
func (t *Transport) reap() bool {
	if t.offering.Load() == 0 {
		return false
	}
	reaped := false
	for _, p := range t.order {
		p.offerMu.Lock()
		if len(p.offers) > 0 {
			head := p.out.r.c.head.Load()
			n := 0
			for n < len(p.offers) && head >= p.offers[n].end {
				p.offers[n].done.SendDone(nil)
				p.offers[n] = offer{}
				n++
			}
			if n > 0 {
				p.offers = p.offers[:copy(p.offers, p.offers[n:])]
				t.offering.Add(int32(-n))
				reaped = true
			}
		}
		p.offerMu.Unlock()
	}
	return reaped
}

// failOffers completes p's started sends: those taken with success, the
// rest with err.
func (p *peer) failOffers(err error) {
	p.offerMu.Lock()
	defer p.offerMu.Unlock()
	var head uint64
	if s := p.seg.Load(); s != nil {
		head = p.out.r.c.head.Load()
	}
	for i, o := range p.offers {
		if head >= o.end {
			o.done.SendDone(nil)
		} else {
			o.done.SendDone(err)
		}
		p.offers[i] = offer{}
	}
	p.t.offering.Add(int32(-len(p.offers)))
	p.offers = p.offers[:0]
}
