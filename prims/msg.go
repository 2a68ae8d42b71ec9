package prims

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Message tags. Each collective and each phase of its algorithm has its own
// tag, (collective+1)<<16 | phase, on the collective context; within one
// phase the messages between two ranks are matched in order (MPI's
// non-overtaking rule), so successive calls on one communicator never mix,
// and calls on different communicators never meet.
const (
	phaseMain   = 0   // the one phase of most algorithms
	phaseFold   = 1   // non-power-of-two fold: extra rank to its partner
	phaseUnfold = 2   // and back
	phaseGather = 3   // second half of a composite algorithm
	phaseBcast  = 4   // broadcast half of a composite algorithm
	phaseStep   = 128 // + step, for algorithms with lg p steps
	phaseDouble = 192 // + step, for the recursive-doubling half of an algorithm
)

func tag(coll topo.Collective, phase int) int {
	return (int(coll)+1)<<16 | phase
}

func sizeOf[T spmd.Number]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// checkLen checks that a message of n bytes filled a buffer of want.
func checkLen(src, n, want int) error {
	if n != want {
		return fmt.Errorf("%w: %d bytes arrived from rank %d, want %d (do the ranks pass matching lengths?)",
			ErrCount, n, src, want)
	}
	return nil
}

// recvFrom receives exactly len(s) elements from src into s.
func recvFrom[T spmd.Number](ctx context.Context, cc *spmd.Comm, src, tag int, s []T) error {
	b := spmd.Bytes(s)
	n, err := cc.Recv(ctx, src, tag, b)
	if err != nil {
		return err
	}
	return checkLen(src, n, len(b))
}

// sendTo sends s to dst.
func sendTo[T spmd.Number](ctx context.Context, cc *spmd.Comm, dst, tag int, s []T) error {
	return cc.Send(ctx, dst, tag, spmd.Bytes(s))
}

// exchange sends s to dst and receives exactly len(r) elements from src.
func exchange[T spmd.Number](ctx context.Context, cc *spmd.Comm, s []T, dst int, r []T, src, tag int) error {
	rb := spmd.Bytes(r)
	n, err := cc.Sendrecv(ctx, spmd.Bytes(s), dst, tag, rb, src, tag)
	if err != nil {
		return err
	}
	return checkLen(src, n, len(rb))
}

// pending is a set of outstanding requests of one algorithm step. Steps
// take one from newPending and give it back with free, so that its slices,
// and the requests it waited for, serve the next step: a collective then
// allocates nothing in steady state.
type pending struct {
	reqs []*spmd.Request
	want []int // expected byte counts of receives; -1 for sends
	srcs []int
}

var pendingPool = sync.Pool{New: func() any { return new(pending) }}

func newPending() *pending { return pendingPool.Get().(*pending) }

// free cancels or waits for what is still outstanding (abort) and gives p
// back; p is not to be used after.
func (p *pending) free() {
	p.abort()
	pendingPool.Put(p)
}

func (p *pending) isend(ctx context.Context, cc *spmd.Comm, dst, tag int, b []byte) {
	p.reqs = append(p.reqs, cc.Isend(ctx, dst, tag, b))
	p.want = append(p.want, -1)
	p.srcs = append(p.srcs, dst)
}

func (p *pending) irecv(cc *spmd.Comm, src, tag int, b []byte) {
	p.reqs = append(p.reqs, cc.Irecv(src, tag, b))
	p.want = append(p.want, len(b))
	p.srcs = append(p.srcs, src)
}

// wait waits for request i and checks a receive's length.
func (p *pending) wait(ctx context.Context, i int) error {
	n, err := p.reqs[i].Wait(ctx)
	if err == nil && p.want[i] >= 0 {
		err = checkLen(p.srcs[i], n, p.want[i])
	}
	return err
}

// waitAll waits for every request; on the first failure it cancels the
// rest, so that none still touches its buffer when it returns. It waits
// from the last to the first, for the reason abort cancels in that order:
// a wait whose ctx ends cancels, or takes back, the request it waits for,
// and waiting from the first took back a started send while the ones after
// it to the same peer could still be taken.
func (p *pending) waitAll(ctx context.Context) error {
	for i := len(p.reqs) - 1; i >= 0; i-- {
		if err := p.wait(ctx, i); err != nil {
			p.abort()
			return err
		}
	}
	p.reset()
	return nil
}

// abort cancels the requests that have not started moving bytes and waits
// for those that have. It goes from the last to the first, so that what
// still reaches each peer is a prefix of what was meant for it, never a
// stream with a hole that would mismatch its receives.
func (p *pending) abort() {
	if len(p.reqs) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := len(p.reqs) - 1; i >= 0; i-- {
		p.reqs[i].Wait(ctx)
	}
	p.reset()
}

// reset forgets the requests, freeing those that completed for reuse.
func (p *pending) reset() {
	for _, r := range p.reqs {
		r.Free()
	}
	clear(p.reqs)
	p.reqs, p.want, p.srcs = p.reqs[:0], p.want[:0], p.srcs[:0]
}
