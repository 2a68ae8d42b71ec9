package spmd

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun-hpc/gorun/spmd/release"
)

// Request is a pending Isend or Irecv. Wait blocks until it completes. A
// Request belongs to the goroutine that started it; Wait may be called more
// than once and returns the same result each time.
type Request struct {
	// done receives one token when the request completes, if its owner
	// blocks on it (waiting); a polling owner looks at state instead, and
	// no token is sent: a channel send and receive per message were a
	// tenth of an 8-byte hop. The owner makes it before it first blocks
	// (most requests never do), and a pooled request keeps it.
	done chan struct{}
	fin  atomic.Bool // claimed by whoever completes the request: once only
	// started says a send was handed to the transport to complete later
	// (transport.Starter), which may take it back (transport.Withdrawer).
	started atomic.Bool
	state   atomic.Uint32 // reqRunning, reqWaiting or reqFinished
	// drain is e.drain(key.src, r) for a send, made the first time a
	// goroutine drains it (goDrain) and kept by a pooled request: go
	// r.drain() then allocates nothing, where go e.drain(dst, r) built a
	// closure for every send that needed a goroutine.
	drain func()

	e    *engine
	kind reqKind
	key  matchKey // receives: what it matches; sends: key.src is the destination
	buf  []byte   // the user's buffer
	ctx  context.Context

	// Set before the token is sent; read only after it is received.
	n   int
	err error

	// Guarded by the engine's lock.
	stage reqStage

	complete bool // the owner has taken the token
	// quiet says that Wait blocks at once, without driving the transport:
	// a receive of Comm.Listen, which may never complete.
	quiet bool

	tr *traced // set when the request is traced (profiling on)
}

type reqKind uint8

const (
	recvReq reqKind = iota
	sendReq
)

type reqStage uint8

const (
	reqQueued  reqStage = iota // posted (receive) or waiting its turn (send)
	reqClaimed                 // the transport is filling or draining buf
	reqDone
)

// A request's completion state.
const (
	reqRunning  = iota
	reqWaiting  // its owner blocks on done: the completer sends a token
	reqFinished // n and err are set
)

// reqPool recycles the requests of blocking calls, which never escape to
// the caller, so that Send and Recv allocate nothing in steady state.
// The requests of Isend and Irecv come from it too, and are garbage once
// their owner drops them, unless it calls Free: a new one is one
// allocation, its channel and drain function made only when needed (a
// window of 64 8-byte Isends and Irecvs each way at np 2 made three
// allocations a request, and took 61-80 us an exchange against 42-43 with one).
var reqPool = sync.Pool{New: func() any { return new(Request) }}

// goDrain starts a goroutine that sends r and the sends queued behind it
// (engine.drain).
func (r *Request) goDrain() {
	if r.drain == nil {
		r.drain = func() { r.e.drain(r.key.src, r) }
	}
	go r.drain()
}

func newRequest(e *engine, kind reqKind, buf []byte) *Request {
	r := reqPool.Get().(*Request)
	r.e, r.kind, r.buf = e, kind, buf
	return r
}

// Free gives a completed request back for reuse by later calls, the way
// MPI_Request_free does, so that a loop of Isend and Irecv allocates
// nothing: r must not be used after. A request that has not completed
// (Wait has not returned, or Test has not reported it) is still in use,
// and Free leaves it alone.
func (r *Request) Free() {
	if r == nil || !r.complete {
		return
	}
	r.release()
}

// release returns a completed request of a blocking call to the pool.
func (r *Request) release() {
	*r = Request{done: r.done, drain: r.drain}
	reqPool.Put(r)
}

// finish completes the request once; later calls are ignored. Marking it
// finished, or sending the token to an owner that blocks, is the
// completer's last touch of r: the owner may recycle r as soon as it sees
// either.
func (r *Request) finish(n int, err error) {
	if !r.fin.CompareAndSwap(false, true) {
		return
	}
	r.n, r.err = n, err
	if r.state.Swap(reqFinished) == reqWaiting {
		r.done <- struct{}{}
	}
}

// settle completes r as finish does, for a request that no other
// goroutine can reach: its owner's, which no queue, transport or peer
// holds any more (a blocking Send whose bytes its caller moved, a receive
// that found its message already there). Wait finds it finished. finish's
// compare-and-swap and swap are locked instructions, each waiting for the
// stores before it: a stream of 8-byte blocking sends at np 2, received
// from rank 1's early messages, took 117-151 ns a message with them in
// the receive and 101-121 without (5 runs each in turns).
func (r *Request) settle(n int, err error) {
	r.n, r.err = n, err
	release.Store32(&r.state, reqFinished)
}

// finished reports whether the request has completed.
func (r *Request) finished() bool { return r.state.Load() == reqFinished }

// block waits for the token of a request that has not finished, unless it
// finishes first; with ctx ending first, it cancels the request and waits
// for it to complete.
func (r *Request) block(ctx context.Context) {
	if r.done == nil {
		r.done = make(chan struct{}, 1) // published to finish by the swap below
	}
	if !r.state.CompareAndSwap(reqRunning, reqWaiting) {
		return // finished meanwhile: no token comes
	}
	select {
	case <-r.done:
		return
	case <-ctx.Done():
	}
	// A request whose bytes are moving is waited for; a started send may
	// still be taken back while its receiver has not begun to copy it, so
	// that one is asked again now and then rather than waited for until a
	// receive that may never come is posted.
	for !r.e.cancel(r, ctx.Err()) && r.started.Load() {
		select {
		case <-r.done:
			return
		case <-time.After(withdrawEvery):
		}
	}
	<-r.done
}

// withdrawEvery is how often a cancelled wait for a started send tries to
// take it back.
const withdrawEvery = 10 * time.Millisecond

// started is a send request the transport started (transport.Starter); it
// is told, as a transport.Done, when the send completes.
type started Request

// SendDone completes the request.
func (d *started) SendDone(err error) {
	r := (*Request)(d)
	r.e.sent(r, err)
}

// Wait blocks until the request completes and returns the number of bytes
// received (for a receive) or sent. If ctx ends first, a request that has not
// started moving bytes is cancelled and Wait returns ctx's error; one whose
// bytes are already moving is waited for, since its buffer is in use, except
// a started send its receiver has not begun to copy, which is taken back
// (see Comm.Isend).
func (r *Request) Wait(ctx context.Context) (int, error) {
	if r.complete {
		return r.n, r.err
	}
	var waited int64 // when the wait began, if it blocked and is traced
	if !r.finished() {
		if r.e == nil {
			panic("spmd: Request.Wait on a freed Request (or one no call returned)")
		}
		if r.tr != nil {
			waited = r.tr.rec.Now()
		}
		if p := r.e.poller; p == nil || r.quiet || !r.poll(ctx, p) {
			r.block(ctx)
		}
	}
	r.complete = true
	if r.tr != nil {
		r.tr.record(r, waited)
	}
	return r.n, r.err
}

// Test reports whether the request has completed, without blocking.
func (r *Request) Test() bool {
	if r.complete {
		return true
	}
	if r.finished() {
		r.complete = true
		if r.tr != nil {
			r.tr.record(r, 0)
		}
		return true
	}
	return false
}

// WaitAll waits for every request and returns the errors joined, in the
// requests' order. It waits from the last to the first: if ctx ends, the
// requests still waiting are cancelled (or taken back) from the last, so
// that of the sends made in order to one peer, those that still reach it
// are the first ones, never some with a gap before them.
func WaitAll(ctx context.Context, reqs ...*Request) error {
	var errs []error
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i] == nil {
			continue
		}
		if _, err := reqs[i].Wait(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	slices.Reverse(errs)
	return errors.Join(errs...)
}
