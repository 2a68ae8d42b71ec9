package shm

import (
	"fmt"
	"sync"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// offer is a single-copy message that the consumer has passed, to be
// copied out of the producer's memory by whoever takes it. Offers are
// pooled.
type offer struct {
	c    *consumer
	t    *Transport
	cp   copier
	addr uint64
	n    int
	slot uint32
}

var offerPool = sync.Pool{New: func() any { return new(offer) }}

func newOffer(c *consumer, pid int, addr uint64, n int, slot uint32) *offer {
	o := offerPool.Get().(*offer)
	o.c, o.t, o.addr, o.n, o.slot = c, c.t, addr, n, slot
	o.cp.pid, o.cp.state = pid, copyOK
	return o
}

// Take implements transport.Offer.
func (o *offer) Take(dst []byte) error {
	t, c := o.t, o.c
	defer o.free()
	if len(dst) > o.n {
		return fmt.Errorf("shm: taking %d bytes of a %d-byte offer", len(dst), o.n)
	}
	if !t.enter() {
		// This transport closes: the peer was not lost (ErrClosed alone,
		// as Send and report say it), lest prims tell the others that it
		// was (TestPeerLost over mixed, 1 run in 20).
		return &transport.PeerError{Rank: c.peer, Addr: addr, Err: transport.ErrClosed}
	}
	defer t.exit()
	st := &c.r.c.slots[o.slot]
	if !st.CompareAndSwap(slotOffered, slotCopying) {
		if c.r.c.prodState.Load() == endOpen && st.CompareAndSwap(slotWithdrawn, slotFree) {
			return transport.ErrWithdrawn // the producer forgot it: the slot is ours to free
		}
		return transport.Lost(c.peer, addr, fmt.Errorf("%w: it withdrew a single-copy send", errPeerBroke))
	}
	return o.copyOut(dst)
}

// copyOut copies the payload of an offer whose slot the caller moved to
// slotCopying into dst, and marks it taken; a copy that fails drops the
// link.
func (o *offer) copyOut(dst []byte) error {
	t, c := o.t, o.c
	st := &c.r.c.slots[o.slot]
	var err error
	if len(dst) > 0 {
		err = o.cp.read(dst, o.addr)
	}
	if err != nil {
		// The message cannot be had: drop the link, so that the producer,
		// which waits for the slot, hears of it, and our receiver reports
		// the peer lost.
		c.r.c.consState.Store(endBroken)
		if t != nil {
			t.seg.alarm()
		}
		return transport.Lost(c.peer, addr, err)
	}
	st.Store(slotTaken)
	c.wakeTaken()
	return nil
}

// Release implements transport.Offer: the message is dropped untaken.
// Its producer's send completes as though it had been taken (a blocking
// one waits for that), or, withdrawn already, its slot is freed.
func (o *offer) Release() {
	if c := o.c; c != nil && o.t.enter() { // the ring is still mapped
		defer o.t.exit()
		st := &c.r.c.slots[o.slot]
		if st.CompareAndSwap(slotOffered, slotTaken) {
			c.wakeTaken()
		} else if c.r.c.prodState.Load() == endOpen {
			st.CompareAndSwap(slotWithdrawn, slotFree)
		}
	}
	o.free()
}

// free returns the offer to the pool.
func (o *offer) free() {
	*o = offer{}
	offerPool.Put(o)
}
