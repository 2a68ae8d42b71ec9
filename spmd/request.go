package spmd

import (
	"context"
	"errors"
	"sync"
)

// Request is a pending Isend or Irecv. Wait blocks until it completes. A
// Request belongs to the goroutine that started it; Wait may be called more
// than once and returns the same result each time.
type Request struct {
	done chan struct{} // closed when the request completes

	e    *engine
	kind reqKind
	key  matchKey // receives: what it matches
	buf  []byte   // the user's buffer
	ctx  context.Context

	// Set before done is closed; read only after it.
	n   int
	err error

	// Guarded by the engine's lock.
	state reqState
	into  *inbox // a receive attached to an unexpected message still arriving

	once sync.Once
}

type reqKind uint8

const (
	recvReq reqKind = iota
	sendReq
)

type reqState uint8

const (
	reqQueued  reqState = iota // posted (receive) or waiting its turn (send)
	reqClaimed                 // the transport is filling or draining buf
	reqDone
)

func newRequest(e *engine, kind reqKind, buf []byte) *Request {
	return &Request{done: make(chan struct{}), e: e, kind: kind, buf: buf}
}

// finish completes the request once; later calls are ignored.
func (r *Request) finish(n int, err error) {
	r.once.Do(func() {
		r.n, r.err = n, err
		close(r.done)
	})
}

// Wait blocks until the request completes and returns the number of bytes
// received (for a receive) or sent. If ctx ends first, a request that has not
// started moving bytes is cancelled and Wait returns ctx's error; one whose
// bytes are already moving is waited for, since its buffer is in use.
func (r *Request) Wait(ctx context.Context) (int, error) {
	select {
	case <-r.done:
		return r.n, r.err
	default:
	}
	select {
	case <-r.done:
		return r.n, r.err
	case <-ctx.Done():
		if r.e.cancel(r, ctx.Err()) {
			return r.n, r.err
		}
		<-r.done
		return r.n, r.err
	}
}

// Done returns a channel closed when the request completes.
func (r *Request) Done() <-chan struct{} { return r.done }

// Test reports whether the request has completed, without blocking.
func (r *Request) Test() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// WaitAll waits for every request and returns the errors joined.
func WaitAll(ctx context.Context, reqs ...*Request) error {
	var errs []error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if _, err := r.Wait(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
