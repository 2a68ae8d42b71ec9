package prims

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// ErrAlgo is wrapped by the error of a call that asks for an algorithm that
// does not implement its collective.
var ErrAlgo = errors.New("algorithm does not implement the collective")

// ErrCount is wrapped by the error of a call whose buffers have lengths that
// do not fit the collective or do not match another rank's.
var ErrCount = errors.New("buffer length does not fit")

// ErrMismatch is wrapped by the error of a call that found another rank
// in a different collective call (where the algorithm can tell: the
// Shared algorithms do).
var ErrMismatch = errors.New("ranks in different collective calls")

// ErrConcurrent is wrapped by the error of a call made while another
// collective call on its communicator is in progress on this rank, from
// another goroutine: a communicator's collectives run one at a time, in
// the same order on every rank (Dup a communicator for a second stream,
// or issue non-blocking calls, IAllReduce and the rest, which queue).
var ErrConcurrent = errors.New("another collective call on the communicator is in progress")

// ErrOp is wrapped by the error of a reduction given the zero Op.
var ErrOp = errors.New("no reduction op")

// Option configures one collective call. Every rank must pass the same
// options. An Option is a value, not a function, so that passing one
// allocates nothing.
type Option struct {
	algo   topo.Algo
	queued bool   // the call runs from its communicator's queue (IAllReduce, ...)
	site   uint32 // a queued call's call site in the trace, taken when it was issued
}

// WithAlgo forces the call's algorithm instead of letting Choose pick it. An algorithm that does not implement the collective is an error
// (ErrAlgo).
func WithAlgo(a topo.Algo) Option {
	return Option{algo: a}
}

// apply merges opts into one; a later option wins.
func apply(opts []Option) Option {
	var o Option
	for _, x := range opts {
		if x.algo != "" {
			o.algo = x.algo
		}
		o.queued = o.queued || x.queued
		if x.site != 0 {
			o.site = x.site
		}
	}
	return o
}

// call is one collective call in progress on one rank.
type call struct {
	ctx  context.Context // the caller's, also cancelled when the communicator breaks
	c    *spmd.Comm      // the caller's communicator
	cc   *spmd.Comm      // its collective context, which carries the messages
	st   *state
	coll topo.Collective
	algo topo.Algo
	// bytes is the size of the call as Choose counts it (the whole
	// buffer), the same on every rank when they pass matching lengths:
	// the Shared algorithms check it (call.matches).
	bytes int
	// pooled says that the call came from callPool, not state.spare.
	pooled bool

	user     context.Context // the caller's own context
	root     *call           // the top-level call of a sub-call, else itself
	releases []lease         // scratch lent to the call, given back by end
	tr       *traced         // the trace's record of the call, when profiling
	// ints are the buffers of block boundaries (intsFor), kept with
	// the call for the next: 0 the blocks', 1 a fold's super-blocks'.
	ints [2][]int
}

// start begins a call of coll of bytes bytes (the whole buffer of the
// call, as Choose counts them). trivial says that the call moves
// nothing on any rank (one rank, or no elements), so no algorithm need be
// chosen. A blocking call on a communicator with non-blocking collectives
// in flight waits for them first: calls run in the order they are made.
//
// The call is the state's spare one (state.spare) when it has one, else a
// new one, or for a trivial call one from callPool: a collective
// allocates nothing in steady state (a call per collective was a fifth of
// the allocations that set the garbage collector off every few
// milliseconds in a loop of small all-reduces). Taking the spare with two
// plain moves instead of from a sync.Pool made 8-64-byte broadcasts at np
// 2 10-20% faster, all-reduces 3-14% (collbench, medians of 11 and 9
// alternating runs).
func start(ctx context.Context, c *spmd.Comm, coll topo.Collective, bytes int, trivial bool, sg signature, opts []Option) (*call, error) {
	o := apply(opts)
	if o.algo != "" && !Applies(coll, o.algo) {
		return nil, wrapCall(coll, o.algo, c, algoError(coll, o.algo))
	}
	cc := c.Collective()
	st := stateOf(cc)
	if !o.queued && st.q.busy.Load() {
		if err := st.q.drained(ctx); err != nil {
			st.giveUp(cc, err) // the others would wait for this rank
			return nil, wrapCall(coll, o.algo, c, err)
		}
	}
	// Not the trivial calls, which move nothing: a non-blocking one runs
	// on the goroutine that issues it, beside the executor's calls, whose
	// checks it would meet on the same tag. A rank whose call is trivial
	// where another's is not is caught at its next call.
	if checking && !trivial && cc.Size() > 1 {
		if err := checkCall(ctx, cc, st, sg.describe(coll, bytes, o.algo)); err != nil {
			return nil, wrapCall(coll, o.algo, c, err)
		}
	}
	if !trivial && st.busy {
		return nil, wrapCall(coll, o.algo, c, fmt.Errorf("%w on this rank, from another goroutine: call a communicator's collectives one at a time (Dup it for a second stream)", ErrConcurrent))
	}
	if !trivial {
		st.busy = true
	}
	var k *call
	switch {
	case trivial:
		// A trivial non-blocking call runs on the goroutine that issues
		// it, while the executor may run others with the spare.
		k = callPool.Get().(*call)
		k.pooled = true
	case st.spare != nil:
		k, st.spare = st.spare, nil
	default:
		k = new(call)
	}
	// A spare call is zero but for its buffers (reset), so the fields
	// are set one by one: a composite literal assigned through k is built
	// on the stack and copied in 16-byte moves that stalled on the 8-byte
	// stores which built it (no store forwarding); those stalls waited for
	// every older store, the previous broadcast's stores to lines the
	// other ranks poll among them.
	k.ctx, k.user, k.c, k.cc, k.coll, k.algo, k.root, k.bytes = ctx, ctx, c, cc, coll, o.algo, k, bytes
	k.st = st
	k.ctx = k.st.join(ctx)
	var ch choice
	if o.algo == "" && !trivial {
		// The first choice on a communicator probes it, collectively:
		// under k.ctx, so that a rank that gave up ends the probe too.
		var err error
		if ch, err = k.st.choose(k.ctx, c, coll, bytes); err != nil {
			err = k.wrap(k.chooseFailed(err))
			st.busy = false
			return nil, err
		}
		k.algo = ch.algo
	}
	if rec := c.Trace(); rec != nil {
		k.tr = tracedPool.Get().(*traced)
		k.tr.start(rec, k.st, c, coll, k.algo, bytes, o, ch)
	}
	return k, nil
}

// chooseFailed says why the choice of k's algorithm failed, and, unless
// GORUN_ALGO was at fault (every rank fails the same way then), breaks
// the communicator: the other ranks may be probing it with this one.
func (k *call) chooseFailed(err error) error {
	if _, ferr := forced(k.coll); ferr != nil {
		return err
	}
	if cause := context.Cause(k.ctx); cause != nil && !errors.Is(err, spmd.ErrPeerLost) {
		err = cause
	}
	k.st.giveUp(k.cc, err)
	return err
}

// noticeWait bounds how long a call whose receive was withdrawn waits for
// the notice of the rank that withdrew it. The notice is sent right after
// the withdrawal; a sender that died in between is seen lost instead.
const noticeWait = 250 * time.Millisecond

// awaitNotice waits until ctx, a call's context, ends, or for noticeWait.
func awaitNotice(ctx context.Context) {
	t := time.NewTimer(noticeWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// end finishes the call and wraps *err, if set, with the call's identity.
// A call that failed breaks the communicator and tells the other ranks.
// The call becomes its state's spare: k is not to be used after.
func (k *call) end(err *error) {
	if *err != nil {
		// A message its sender withdrew means that the sender gave up
		// (its context ended); its notice, which says why and names it,
		// follows at once.
		if errors.Is(*err, spmd.ErrWithdrawn) && k.ctx.Err() == nil {
			awaitNotice(k.ctx)
		}
		// Once the call's context is done (the caller's ended, or a notice
		// broke the communicator), its cause says why the call failed
		// better than a cancelled wait or a stream cut short does.
		if cause := context.Cause(k.ctx); cause != nil && !errors.Is(*err, spmd.ErrPeerLost) {
			*err = cause
		}
		k.st.giveUp(k.cc, *err)
	}
	for _, l := range k.releases {
		l.release(*err == nil)
	}
	if k.tr != nil {
		k.tr.record(*err)
		tracedPool.Put(k.tr)
	}
	if *err != nil {
		*err = k.wrap(*err)
	}
	st, pooled := k.st, k.pooled
	k.reset()
	if pooled {
		callPool.Put(k)
	} else {
		st.spare = k
		st.busy = false
	}
}

// callPool recycles the trivial calls (state.spare the others): a job of
// one rank makes nothing but those, and should allocate nothing either.
var callPool = sync.Pool{New: func() any { return new(call) }}

// reset zeroes k but keeps its releases' array, emptied, and its ints for
// the next call.
// Field by field, as start sets them.
func (k *call) reset() {
	clear(k.releases)
	k.ctx, k.c, k.cc, k.st, k.coll, k.algo, k.bytes, k.pooled = nil, nil, nil, nil, 0, "", 0, false
	k.user, k.root, k.releases, k.tr = nil, nil, k.releases[:0], nil
}

func (k *call) wrap(err error) error { return wrapCall(k.coll, k.algo, k.c, err) }

// wrapCall names the collective, the algorithm if chosen, and the
// communicator of a call's error.
func wrapCall(coll topo.Collective, algo topo.Algo, c *spmd.Comm, err error) error {
	if algo == "" {
		return fmt.Errorf("%s on comm %d: %w", coll, c.ID(), err)
	}
	return fmt.Errorf("%s (%s) on comm %d: %w", coll, algo, c.ID(), err)
}

// sub returns a call of coll on the sub-communicator sc, inside k: it
// shares k's context, and picks its own algorithm, never a hierarchical
// one (sc lies inside one host, or holds one rank per host).
func (k *call) sub(sc *spmd.Comm, coll topo.Collective, bytes int, fallback topo.Algo) *call {
	s := &call{ctx: k.ctx, user: k.user, c: sc, cc: sc.Collective(), coll: coll, algo: fallback, root: k.root, bytes: bytes}
	s.st = stateOf(s.cc)
	if sc.Size() > 1 && bytes > 0 {
		// A choice that fails (GORUN_ALGO naming an algorithm that does not
		// apply here) keeps the fallback; a lost peer fails the next step.
		a, err := Choose(k.ctx, sc, coll, bytes)
		if err == nil && a != topo.Hierarchical {
			s.algo = a
		}
	}
	return s
}

// borrow lends the call n elements of its communicator's scratch buffer
// until the top-level call ends.
func borrow[T spmd.Number](k *call, n int) []T {
	buf, l := scratch[T](k.st, n)
	if l.sp != nil {
		k.root.releases = append(k.root.releases, l)
	}
	return buf
}

func algoError(coll topo.Collective, a topo.Algo) error {
	return fmt.Errorf("%w: %q does not implement %s; use one of %s", ErrAlgo, a, coll, algoNames(coll))
}

// argError is the error of a call with bad arguments, before it starts.
func argError(c *spmd.Comm, coll topo.Collective, err error) error {
	return fmt.Errorf("%s on comm %d: %w", coll, c.ID(), err)
}

// countError says that a buffer's length does not fit.
func countError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCount, fmt.Sprintf(format, args...))
}

// rootError checks a root rank.
func rootError(c *spmd.Comm, root int) error {
	if root < 0 || root >= c.Size() {
		return fmt.Errorf("root %d on a communicator of %d ranks: %w", root, c.Size(), spmd.ErrBadRank)
	}
	return nil
}
