package prims

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// The non-blocking collectives (MPI-3's MPI_Iallreduce and the like)
// return at once with a Request and run in the background, one after the
// other in issue order, while the caller computes: a data-parallel driver
// issues a gradient bucket's all-reduce as soon as backward has filled it,
// and waits for them all before the optimizer step.
//
// Each communicator has, on each rank, a queue of the non-blocking
// collectives issued on it, in its state, and an executor goroutine that
// runs them one after the other through the very code of the blocking
// calls (the same algorithm choice, shared memory and failure rules). The
// executor exits as soon as the queue is empty, and the next issue starts
// another: it outlives no request. A blocking collective called on a
// communicator whose queue is not empty waits, in the caller's goroutine,
// until the executor has emptied it, and then runs there as usual; on a
// quiet communicator it pays one atomic load for this.
//
// What an issue allocates: the Request with the call's arguments (one
// object) and its done channel. Starting an executor goroutine, when the
// queue was empty, allocates nothing in steady state.

// Request is a non-blocking collective in flight, returned by IAllReduce,
// IReduceScatter, IAllGather and IBroadcast. The collective's buffers
// belong to it until it completes (Wait returns its result, Done is
// closed, or Test reports it): the caller must not read or write them
// before, as MPI's rule is, since the collective works in them in place,
// without a copy. A Wait that returns its context's error leaves them to
// the collective still.
//
// A Request is safe for concurrent use: any goroutine may Wait for it,
// Test it or watch Done, any number of times, each seeing the same
// result.
type Request struct {
	done chan struct{} // closed once the collective has completed
	err  error         // its result: written before done is closed

	ctx  context.Context // the issue's: the collective runs under it
	c    *spmd.Comm
	coll topo.Collective
	job  job // the collective with its arguments
}

// job is a queued collective with its arguments: run makes the blocking
// call, as the queue's executor, and lets go of the buffers.
type job interface {
	run() error
}

// Wait waits until the collective has completed and returns its error, or
// until ctx ends, then with ctx's error. ctx bounds only the waiting: the
// collective goes on under the context it was issued with, and owns its
// buffers until it completes.
func (r *Request) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	default:
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s on comm %d: %w", r.coll, r.c.ID(), ctx.Err())
	}
}

// Test reports whether the collective has completed, and then its error,
// without blocking.
func (r *Request) Test() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

// Done returns a channel that is closed once the collective has completed
// (Test then reports its error).
func (r *Request) Done() <-chan struct{} { return r.done }

// issue starts the collective coll of j on c, whose Request r is: at once
// when it is trivial (one rank or no elements: nothing to wait for), else
// at the end of c's queue.
func (r *Request) issue(ctx context.Context, c *spmd.Comm, coll topo.Collective, j job, trivial bool) *Request {
	r.ctx, r.c, r.coll, r.job = ctx, c, coll, j
	r.done = make(chan struct{})
	if trivial {
		r.finish(j.run())
		return r
	}
	stateOf(c.Collective()).push(r)
	return r
}

func (r *Request) finish(err error) {
	r.err = err
	close(r.done)
}

// queue is a communicator's non-blocking collectives on one rank, and the
// executor that runs them.
type queue struct {
	// busy says that the queue holds collectives, and so that an executor
	// runs them: blocking calls wait for it to clear. Written under mu.
	busy atomic.Bool

	mu sync.Mutex
	// protects following
	reqs    []*Request // issued, not yet completed, in issue order; reqs[head] runs
	head    int
	idle    chan struct{} // closed when the executor empties the queue; made by a blocking call that waits
	execute func()        // the state's execute, the executor goroutine's body
}

// push queues r, and starts an executor if none runs.
func (st *state) push(r *Request) {
	q := &st.q
	q.mu.Lock()
	q.reqs = append(q.reqs, r)
	start := !q.busy.Load()
	q.busy.Store(true)
	if q.execute == nil {
		q.execute = st.execute
	}
	execute := q.execute
	q.mu.Unlock()
	if start {
		go execute() // a func value made once: go st.execute() built a closure every time
	}
}

// execute runs the queue's collectives in issue order until it is empty.
// Each completes before the next starts, as the blocking calls would. The
// queue is marked idle only after its last request has finished, so that
// a blocking call that waited for it finds every request it followed
// completed; a program that has waited for every request finds the
// executor gone a moment later (drained waits for that).
func (st *state) execute() {
	q := &st.q
	for {
		q.mu.Lock()
		r := q.reqs[q.head]
		q.mu.Unlock()
		err := st.run(r)

		q.mu.Lock()
		q.reqs[q.head] = nil
		q.head++
		if q.head >= 64 && 2*q.head >= len(q.reqs) {
			// A queue that never empties moves its tail down instead
			// of growing.
			n := copy(q.reqs, q.reqs[q.head:])
			clear(q.reqs[n:])
			q.reqs, q.head = q.reqs[:n], 0
		}
		q.mu.Unlock()
		r.finish(err)

		q.mu.Lock()
		if q.head < len(q.reqs) {
			q.mu.Unlock()
			continue
		}
		q.reqs, q.head = q.reqs[:0], 0
		q.busy.Store(false)
		idle := q.idle
		q.idle = nil
		q.mu.Unlock()
		if idle != nil {
			close(idle)
		}
		return
	}
}

// run runs r's collective, unless the communicator is broken: then every
// later request fails at once, with the reason, as the first did.
func (st *state) run(r *Request) error {
	if st.broken != nil && st.broken.Err() != nil {
		return fmt.Errorf("%s on comm %d: %w", r.coll, r.c.ID(), context.Cause(st.broken))
	}
	return r.job.run()
}

// drained waits until the executor has emptied the queue, or ctx ends.
// Only the goroutine that issues on the communicator calls it, so nothing
// is queued meanwhile.
func (q *queue) drained(ctx context.Context) error {
	q.mu.Lock()
	if !q.busy.Load() {
		q.mu.Unlock()
		return nil
	}
	if q.idle == nil {
		q.idle = make(chan struct{})
	}
	idle := q.idle
	q.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// queued is apply for a non-blocking call on c: its executor must not
// wait for the queue it empties. When c is traced, the call's site is
// taken here, in the caller's goroutine.
func queued(c *spmd.Comm, opts []Option) Option {
	o := apply(opts)
	o.queued = true
	o.site = c.Trace().Site()
	return o
}

// IAllReduce is the non-blocking AllReduce: it queues the all-reduce of
// buf on c and returns at once; the Request says when it has completed,
// and how. buf belongs to the collective until then.
//
// The collectives on c, non-blocking and blocking, run in the order they
// are called, which must be the same on every rank; so they are called
// from one goroutine per communicator (Wait, Test and Done from any).
// ctx bounds the collective, queued and running: once it ends, the
// collective fails, and breaks c as a blocking call that gives up does.
// A call of no elements, or on one rank, completes before IAllReduce
// returns. Errors, argument errors included, come from the Request.
func IAllReduce[T spmd.Number](ctx context.Context, c *spmd.Comm, buf []T, op Op[T], opts ...Option) *Request {
	j := &allReduceJob[T]{buf: buf, op: op, opt: queued(c, opts)}
	return j.issue(ctx, c, topo.AllReduce, j, len(buf) == 0 || c.Size() == 1)
}

type allReduceJob[T spmd.Number] struct {
	Request
	buf []T
	op  Op[T]
	opt Option
}

func (j *allReduceJob[T]) run() error {
	err := AllReduce(j.ctx, j.c, j.buf, j.op, j.opt)
	j.buf = nil
	return err
}

// IReduceScatter is the non-blocking ReduceScatter: send and recv belong
// to the collective until the Request completes. See IAllReduce.
func IReduceScatter[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, op Op[T], opts ...Option) *Request {
	j := &reduceScatterJob[T]{send: send, recv: recv, op: op, opt: queued(c, opts)}
	return j.issue(ctx, c, topo.ReduceScatter, j, len(send) == 0 || c.Size() == 1)
}

type reduceScatterJob[T spmd.Number] struct {
	Request
	send, recv []T
	op         Op[T]
	opt        Option
}

func (j *reduceScatterJob[T]) run() error {
	err := ReduceScatter(j.ctx, j.c, j.send, j.recv, j.op, j.opt)
	j.send, j.recv = nil, nil
	return err
}

// IAllGather is the non-blocking AllGather: send and recv belong to the
// collective until the Request completes. See IAllReduce.
func IAllGather[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, opts ...Option) *Request {
	j := &allGatherJob[T]{send: send, recv: recv, opt: queued(c, opts)}
	return j.issue(ctx, c, topo.AllGather, j, len(send) == 0 || c.Size() == 1)
}

type allGatherJob[T spmd.Number] struct {
	Request
	send, recv []T
	opt        Option
}

func (j *allGatherJob[T]) run() error {
	err := AllGather(j.ctx, j.c, j.send, j.recv, j.opt)
	j.send, j.recv = nil, nil
	return err
}

// IBroadcast is the non-blocking Broadcast: buf belongs to the collective
// until the Request completes, on the root too. See IAllReduce.
func IBroadcast[T spmd.Number](ctx context.Context, c *spmd.Comm, buf []T, root int, opts ...Option) *Request {
	j := &broadcastJob[T]{buf: buf, root: root, opt: queued(c, opts)}
	return j.issue(ctx, c, topo.Broadcast, j, len(buf) == 0 || c.Size() == 1)
}

type broadcastJob[T spmd.Number] struct {
	Request
	buf  []T
	root int
	opt  Option
}

func (j *broadcastJob[T]) run() error {
	err := Broadcast(j.ctx, j.c, j.buf, j.root, j.opt)
	j.buf = nil
	return err
}
