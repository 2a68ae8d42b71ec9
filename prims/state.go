package prims

import (
	"context"
	"sync"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
)

// stateKey is the key under which a communicator's state hangs
// (spmd.Comm.SetValue).
type stateKey struct{}

// watchTag is the collective-context tag of the receives that watch for a
// lost member; nobody ever sends with it.
const watchTag = 1 << 30

// state is what prims keeps per communicator on one rank: the watch for
// lost members, a scratch buffer and the hierarchical sub-communicators.
// Communicators made by Split inherit their parent's values, so a state
// names its owner and a child builds its own.
type state struct {
	owner uint32 // collective-context id of the communicator

	// lost is cancelled, with the error as cause, when any other member of
	// the communicator is lost or the world closes; nil for one rank.
	lost     context.Context
	stopLost context.CancelCauseFunc

	mu sync.Mutex
	// protects following
	scratch []uint64 // 8-byte aligned, so that any element type fits
	busy    bool     // scratch is lent out
	hier    *hier
}

// stateOf returns cc's state, making it on first use.
func stateOf(cc *spmd.Comm) *state {
	if st, ok := cc.Value(stateKey{}).(*state); ok && st.owner == cc.ID() {
		return st
	}
	st := &state{owner: cc.ID()}
	if cc.Size() > 1 {
		st.lost, st.stopLost = watch(cc)
	}
	cc.SetValue(stateKey{}, st)
	return st
}

// watch posts a receive that nobody answers from every other member of cc:
// each fails only when its member is lost or the world closes, and then
// cancels the returned context with the failure as cause. The goroutines
// end with the world.
func watch(cc *spmd.Comm) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	for r := 0; r < cc.Size(); r++ {
		if r == cc.Rank() {
			continue
		}
		req := cc.Irecv(r, watchTag, nil)
		go func() {
			_, err := req.Wait(context.Background())
			cancel(err)
		}()
	}
	return ctx, cancel
}

// scratch lends a buffer of at least n elements of T from st, and returns
// the function that gives it back. keep=false drops it instead, for a call
// that failed and may have left receives pending into it. Lending while it
// is out allocates a fresh one.
func scratch[T spmd.Number](st *state, n int) ([]T, func(keep bool)) {
	var z T
	words := (n*int(unsafe.Sizeof(z)) + 7) / 8
	if n == 0 {
		return nil, func(bool) {}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.busy {
		return view[T](make([]uint64, words), n), func(bool) {}
	}
	if len(st.scratch) < words {
		st.scratch = make([]uint64, words)
	}
	st.busy = true
	buf := st.scratch
	return view[T](buf, n), func(keep bool) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.busy = false
		if !keep {
			st.scratch = nil
		}
	}
}

func view[T spmd.Number](w []uint64, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(w))), n)
}
