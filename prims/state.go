package prims

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// ErrAborted is wrapped by the error of a collective that failed because
// another rank of the communicator gave up a collective for a reason other
// than a lost peer (its context ended, say). The communicator cannot run
// collectives any more.
var ErrAborted = errors.New("another rank abandoned a collective")

// stateKey is the key under which a communicator's state hangs
// (spmd.Comm.SetValue): a Key, which every call finds with two loads.
var stateKey = spmd.NewKey("prims state")

// noticeTag is the collective-context tag of the notices a rank sends when
// it gives up a collective.
const noticeTag = 1 << 30

// state is what prims keeps per communicator on one rank: whether the
// communicator is broken, a scratch buffer, the hierarchical
// sub-communicators and the queue of non-blocking collectives.
// Communicators made by Split (and Dup) inherit their parent's values, so
// a state names its owner and a child builds its own.
type state struct {
	owner uint32 // collective-context id of the communicator

	// broken is cancelled, with the reason as cause, when this rank or a
	// notice from another gives up a collective on the communicator: every
	// pending and later call fails then, instead of waiting for ranks that
	// have left. Nil for one rank.
	broken context.Context
	breaks context.CancelCauseFunc

	// The last caller context joined with broken, and recent choices of
	// algorithm: read without the lock by every call (the lock and the map
	// lookups were a third of prims' own time in an 8-byte all-reduce),
	// replaced under it.
	merged atomic.Pointer[merged]
	recent [recentChoices]atomic.Pointer[choice]
	// forced is the trace's names and prediction of the last call whose
	// algorithm was forced (collbench forces topo's own choice), so that
	// a loop of them does not run the model per call.
	forced atomic.Pointer[forcedChoice]
	// asyncTrack is the trace's id of the track of this communicator's
	// non-blocking collectives, once interned.
	asyncTrack atomic.Uint32
	// area is the Shared algorithms' memory, mapped on first use (under
	// mu) and then read without the lock by every call.
	area atomic.Pointer[area]
	// The scratch buffers: a call may hold two at once (a reduce-scatter's
	// work vector and its receive slots).
	scratch [scratchBufs]spare
	// q is the non-blocking collectives issued on the communicator.
	q queue
	// spare is the struct of the last call that ended, for the next to
	// start: read and written without a lock, since the calls on one
	// communicator do not overlap. A blocking call takes it only once the
	// queue's executor, which runs the non-blocking ones, is done
	// (queue.drained), and the executor runs one at a time.
	spare *call
	// busy is set by the call in progress (not the trivial ones, which
	// move nothing): a second, from another goroutine, fails at once
	// (ErrConcurrent) instead of sharing its spare and its tags. A plain
	// bool, like spare, read and written by the calls, which do not
	// overlap unless a program errs: it catches such a program at its
	// first overlap of more than a few nanoseconds (the race detector at
	// any), where an atomic's locked write cost a fifth of an 8-byte
	// broadcast at np 2.
	busy bool
	// checked counts the calls checked under GORUN_CHECK_COLLECTIVES.
	checked int

	mu sync.Mutex
	// protects following
	hier    *hier
	choices map[choiceKey]choice // Choose's answers, which depend only on these
}

// recentChoices is how many choices a state answers without its lock,
// by (collective, size) hashed: a program's few sizes in steady state.
const recentChoices = 16

// choice is one of Choose's answers; when the communicator is
// traced, with the time the model predicts for it and the trace's ids of
// the collective's and the algorithm's names (for goprof).
type choice struct {
	key          choiceKey
	algo         topo.Algo
	pred         time.Duration
	name, algoID uint32
}

// forcedChoice is a forced algorithm's choice: its key and algorithm
// with the trace's ids and the model's prediction.
type forcedChoice struct {
	choice
}

// choiceKey is what Choose's answer on one communicator depends on.
type choiceKey struct {
	coll  topo.Collective
	bytes int
}

// maxChoices bounds the cache of choices: a program whose message sizes
// keep changing starts it again rather than growing it.
const maxChoices = 4096

// choose is Choose on c, remembered per (collective, size): the answer
// is a pure function of them once the model is fitted, and asking again
// cost a few microseconds per call (the environment, the model and layout
// lookups, the cost formulas).
func (st *state) choose(ctx context.Context, c *spmd.Comm, coll topo.Collective, bytes int) (choice, error) {
	k := choiceKey{coll, bytes}
	slot := &st.recent[(uint(coll)*31+uint(bytes))%recentChoices]
	if ch := slot.Load(); ch != nil && ch.key == k {
		return *ch, nil
	}
	return st.chooseNew(ctx, c, k, slot)
}

// chooseNew is choose for a key not among the recent ones.
func (st *state) chooseNew(ctx context.Context, c *spmd.Comm, k choiceKey, slot *atomic.Pointer[choice]) (choice, error) {
	coll, bytes := k.coll, k.bytes
	st.mu.Lock()
	ch, ok := st.choices[k]
	st.mu.Unlock()
	if !ok {
		a, err := Choose(ctx, c, coll, bytes)
		if err != nil {
			return choice{}, err
		}
		ch = choice{key: k, algo: a}
		if rec := c.Trace(); rec != nil {
			ch.pred = predicted(c, coll, a, bytes)
			ch.name, ch.algoID = rec.Intern(coll.String()), rec.Intern(string(a))
		}
		st.mu.Lock()
		if st.choices == nil || len(st.choices) >= maxChoices {
			st.choices = make(map[choiceKey]choice)
		}
		st.choices[k] = ch
		st.mu.Unlock()
	}
	slot.Store(&ch)
	return ch, nil
}

// merged is a caller's context joined with the communicator's broken
// context: done when either is. Programs pass one context to call after
// call, so the join is kept for the next call instead of being built and
// torn down around each one (a context, a cancel and an AfterFunc
// registration: a fifth of an 8 B all-reduce).
type merged struct {
	user   context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool
}

// join returns ctx joined with st.broken, reusing the last join made for
// the same ctx. The joined context is cancelled only when ctx or broken is
// (or a later join for another ctx replaces it).
func (st *state) join(ctx context.Context) context.Context {
	if st.broken == nil {
		return ctx
	}
	if m := st.merged.Load(); m != nil && m.user == ctx && m.ctx.Err() == nil {
		return m.ctx
	}
	return st.rejoin(ctx)
}

// rejoin is join for a context other than the last one's, apart so that
// join's common case sets up no frame for the lock and its defer.
func (st *state) rejoin(ctx context.Context) context.Context {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := st.merged.Load()
	if m != nil && m.user == ctx && m.ctx.Err() == nil {
		return m.ctx
	}
	if m != nil {
		m.stop()
		m.cancel(nil)
	}
	c, cancel := context.WithCancelCause(ctx)
	b := st.broken
	stop := context.AfterFunc(b, func() { cancel(context.Cause(b)) })
	if b.Err() != nil {
		// Broken already: the call fails from its start, not once the
		// AfterFunc's goroutine has run.
		cancel(context.Cause(b))
	}
	st.merged.Store(&merged{user: ctx, ctx: c, cancel: cancel, stop: stop})
	return c
}

// FreeComm implements spmd.Freer: when c, its communicator, is freed, the
// state breaks, which ends its joins with callers' contexts, and frees
// the hierarchical sub-communicators. spmd fails the notice receives.
func (st *state) FreeComm(c *spmd.Comm) {
	if st.owner != c.Collective().ID() {
		return // inherited from the communicator c was split from
	}
	if st.breaks != nil {
		st.breaks(fmt.Errorf("comm %d: %w", c.ID(), spmd.ErrFreed))
	}
	st.mu.Lock()
	h := st.hier
	st.hier = nil
	st.mu.Unlock()
	if h != nil {
		for _, sub := range []*spmd.Comm{h.local, h.leaders} {
			if sub != nil {
				sub.Free()
			}
		}
	}
}

// stateOf returns cc's state, making it on first use.
func stateOf(cc *spmd.Comm) *state {
	if st, ok := cc.Value(stateKey).(*state); ok && st.owner == cc.ID() {
		return st
	}
	return newState(cc)
}

// newState makes cc's state, on its first call.
func newState(cc *spmd.Comm) *state {
	st := &state{owner: cc.ID()}
	if cc.Size() > 1 {
		st.broken, st.breaks = context.WithCancelCause(context.Background())
		listen(cc, st)
	}
	cc.SetValue(stateKey, st)
	return st
}

// listen posts a receive of a notice from every other member of cc. The
// goroutines end when a notice arrives, or when the member or this world
// is gone: a member that leaves is not by itself a failure (it may have
// finished), only a rank that cannot finish says so. The receives do not
// reach out to the members (spmd.Comm.Listen): over TCP, Irecv's would
// have connected every pair of ranks of every communicator.
func listen(cc *spmd.Comm, st *state) {
	for r := 0; r < cc.Size(); r++ {
		if r == cc.Rank() {
			continue
		}
		buf := make([]byte, noticeLen)
		req := cc.Listen(r, noticeTag, buf)
		go func() {
			if n, err := req.Wait(context.Background()); err == nil && n >= 4 {
				st.breaks(decodeNotice(cc, r, buf[:n]))
			}
		}()
	}
}

// A notice says why a rank gave up: the world rank it lost, or -1, then
// its error's text, cut to fit noticeLen bytes in all.
const noticeLen = 256

// ownClose reports whether err says that this rank's own world closed: a
// peer that closed its world is lost (ErrPeerLost), however its loss is
// told.
func ownClose(err error) bool {
	return errors.Is(err, spmd.ErrClosed) && !errors.Is(err, spmd.ErrPeerLost)
}

// giveUp marks the communicator broken after this rank's collective failed
// with err, and tells every other member, so that none waits for this rank.
func (st *state) giveUp(cc *spmd.Comm, err error) {
	if st.broken == nil || st.broken.Err() != nil {
		return // alone, or already broken: the others have been told
	}
	st.breaks(err)
	// A peer named with ErrClosed was not lost: this rank's own world was
	// closed under the call (a Close from another goroutine, or its
	// transport's), and the others are told that this rank gave up. Told
	// that the peer was lost, a rank of a host apart named a healthy rank
	// of this host lost (TestPeerLost, mixed).
	lost := int32(-1)
	var pe *spmd.PeerError
	if errors.As(err, &pe) && !ownClose(err) {
		lost = int32(pe.Rank)
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(lost))
	why := err.Error()
	if len(why) > noticeLen-4 {
		why = why[:noticeLen-7] + "..."
	}
	msg = append(msg, why...)
	for r := 0; r < cc.Size(); r++ {
		if r != cc.Rank() {
			cc.Isend(context.Background(), r, noticeTag, msg) // a lost member cannot be told
		}
	}
}

func decodeNotice(cc *spmd.Comm, from int, msg []byte) error {
	lost := int32(binary.LittleEndian.Uint32(msg))
	if lost < 0 {
		if why := string(msg[4:]); why != "" {
			return fmt.Errorf("rank %d: %w: %s", from, ErrAborted, why)
		}
		return fmt.Errorf("rank %d: %w", from, ErrAborted)
	}
	return &spmd.PeerError{Rank: int(lost), Err: fmt.Errorf("%w (seen by rank %d of comm %d)", spmd.ErrPeerLost, from, cc.ID())}
}

// scratchBufs is how many scratch buffers a state keeps.
const scratchBufs = 2

// spare is a scratch buffer: lent says it is lent out, and whoever set it
// owns buf until it clears it.
type spare struct {
	lent atomic.Bool
	buf  []uint64 // 8-byte aligned, so that any element type fits
}

// scratch lends a buffer of at least n elements of T from st, and the
// lease that gives it back. Lending while every buffer is out allocates a
// fresh one, whose lease is empty.
func scratch[T spmd.Number](st *state, n int) ([]T, lease) {
	var z T
	words := (n*int(unsafe.Sizeof(z)) + 7) / 8
	if n == 0 {
		return nil, lease{}
	}
	for i := range st.scratch {
		sp := &st.scratch[i]
		if !sp.lent.CompareAndSwap(false, true) {
			continue
		}
		if len(sp.buf) < words {
			sp.buf = make([]uint64, words)
		}
		return view[T](sp.buf, n), lease{sp}
	}
	return view[T](make([]uint64, words), n), lease{}
}

// lease is a loan of a state's scratch buffer.
type lease struct{ sp *spare }

// release gives the buffer back; keep=false drops it instead, for a call
// that failed and may have left receives pending into it.
func (l lease) release(keep bool) {
	if l.sp == nil {
		return
	}
	if !keep {
		l.sp.buf = nil
	}
	l.sp.lent.Store(false)
}

func view[T spmd.Number](w []uint64, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(w))), n)
}
