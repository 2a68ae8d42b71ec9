package zero

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
)

// chain runs, one after the other in the order they were given, the
// collectives on a second communicator that must follow a request on the
// first: hybrid sharding all-reduces each chunk across hosts once the
// host's reduce-scatter has made it. One goroutine runs them, so every
// rank issues them in the same order.
type chain struct {
	c    *spmd.Comm
	jobs chan *link
	done chan struct{}
	free bool // c is the chain's own: close frees it
}

// link is one collective of a chain, and its result.
type link struct {
	ctx  context.Context
	prev waiter
	f    func(ctx context.Context, c *spmd.Comm) error
	done chan struct{}
	err  error
}

func newChain(c *spmd.Comm) *chain {
	ch := &chain{c: c, jobs: make(chan *link, 64), done: make(chan struct{})}
	go ch.run()
	return ch
}

func (ch *chain) run() {
	defer close(ch.done)
	for l := range ch.jobs {
		l.err = l.prev.Wait(l.ctx)
		if l.err == nil {
			l.err = l.f(l.ctx, ch.c)
		}
		close(l.done)
	}
}

// then runs f on the chain's communicator once prev has completed
// without an error.
func (ch *chain) then(ctx context.Context, prev waiter, f func(ctx context.Context, c *spmd.Comm) error) waiter {
	l := &link{ctx: ctx, prev: prev, f: f, done: make(chan struct{})}
	ch.jobs <- l
	return l
}

// Wait waits for the link, or until ctx ends.
func (l *link) Wait(ctx context.Context) error {
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return fmt.Errorf("zero: waiting for a reduction across hosts: %w", ctx.Err())
	}
}

// close ends the chain once it has run what it was given.
func (ch *chain) close() error {
	close(ch.jobs)
	<-ch.done
	if ch.free {
		return ch.c.Free()
	}
	return nil
}
