package spmd

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// inbox is a message that arrived before a receive matched it.
type inbox struct {
	buf      []byte
	complete bool     // the transport has filled buf
	waiter   *Request // a receive matched while it was still arriving
	// offer, if set, is a message left in its sender's memory (of offerLen
	// bytes, buf unused): the receive that matches it takes it, straight
	// into its own buffer.
	offer    transport.Offer
	offerLen int
}

// The inboxes of messages that arrive before their receive are pooled, so
// that they cost no allocation once their receive has copied them out.
// Those up to smallInbox bytes share one pool (in a loop of broadcasts the
// root runs ahead and most messages arrive early; a buffer per message was
// the last allocation of a small collective). Larger ones go to a pool per
// power of two up to maxPooledInbox: a 16 MiB broadcast between 2 ranks
// spent a tenth of its cycles zeroing a fresh inbox, and as much again
// faulting its pages in, since the next message's offer reaches the
// receiver before the program has posted the next receive.
var (
	inboxPool  = sync.Pool{New: func() any { return new(inbox) }}
	inboxPools [bigClasses]sync.Pool
)

const (
	smallInbox     = 64 << 10
	maxPooledInbox = 64 << 20
	firstBigClass  = 17 // 128 KiB
	bigClasses     = 27 - firstBigClass
)

// inboxClass returns the pool of inboxes that hold n bytes, or nil.
func inboxClass(n int) *sync.Pool {
	switch {
	case n <= smallInbox:
		return &inboxPool
	case n > maxPooledInbox:
		return nil
	}
	return &inboxPools[bits.Len(uint(n-1))-firstBigClass]
}

// newInbox returns an inbox with a buffer of n bytes.
func newInbox(n int) *inbox {
	pool := inboxClass(n)
	if pool == nil {
		return &inbox{buf: make([]byte, n)}
	}
	in, _ := pool.Get().(*inbox)
	if in == nil {
		in = new(inbox)
	}
	if cap(in.buf) < n {
		size := max(n, 64)
		if n > smallInbox {
			size = 1 << bits.Len(uint(n-1))
		}
		in.buf = make([]byte, n, size)
	}
	in.buf = in.buf[:n]
	return in
}

// newOfferBox returns an inbox that holds an offer of n bytes.
func newOfferBox(o transport.Offer, n int) *inbox {
	in := newInbox(0)
	in.offer, in.offerLen, in.complete = o, n, true
	return in
}

// take completes r with the offer in in, copied straight into r's buffer,
// and recycles in.
func (in *inbox) take(r *Request) {
	o, n := in.offer, in.offerLen
	in.recycle()
	r.finish(takeOffer(o, n, r.buf))
}

// takeOffer takes the n-byte offer o into buf and reports the result as
// fill does.
func takeOffer(o transport.Offer, n int, buf []byte) (int, error) {
	m := min(n, len(buf))
	if err := o.Take(buf[:m]); err != nil {
		return 0, err
	}
	if n > len(buf) {
		return m, fmt.Errorf("%w: %d bytes arrived for a %d-byte buffer", ErrTruncated, n, len(buf))
	}
	return m, nil
}

// recycle gives back an inbox whose message has been copied out.
func (in *inbox) recycle() {
	pool := inboxClass(cap(in.buf))
	if pool == nil {
		return
	}
	in.complete, in.waiter, in.offer, in.offerLen = false, nil, nil, 0
	pool.Put(in)
}
