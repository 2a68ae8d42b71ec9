package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
)

// Drained waits until c's executor has left: at once, or a moment after
// the last request finished. It fails only if ctx ends first.
func Drained(ctx context.Context, c *spmd.Comm) error {
	return stateOf(c.Collective()).q.drained(ctx)
}

// SameState reports whether a and b share prims's state on this rank.
func SameState(a, b *spmd.Comm) bool {
	return stateOf(a.Collective()) == stateOf(b.Collective())
}

// SharedRounds returns how many rounds, and pieces of broadcasts and reduces, this
// rank has run through c's shared memory: a Shared call that ran there
// adds to it, one that ran message algorithms instead does not. Call it
// between c's calls, from the goroutine that makes them.
func SharedRounds(c *spmd.Comm) int {
	a := stateOf(c.Collective()).area.Load()
	if a == nil {
		return 0
	}
	return int(a.rounds + a.casts + a.chunks + a.foldings)
}

// LoseSharedMemory makes the Shared algorithms on c run message algorithms
// from now on, for the reason why, as though its ranks could not share
// memory, while topo still says they can: what a failure of the setup of
// c's shared memory that went unseen would do. Every rank of c calls it
// before c's first Shared call.
func LoseSharedMemory(c *spmd.Comm, why error) {
	cc := c.Collective()
	stateOf(cc).area.Store(&area{p: cc.Size(), unshared: why})
}

// Forced is forced: the algorithm GORUN_ALGO forces for coll, if any.
var Forced = forced

// The Shared algorithms' layout constants.
const (
	SharedChunk      = sharedChunk
	SharedCell       = sharedCell
	SharedCells      = sharedCells
	SharedStreams    = sharedStreams
	SharedFolds      = sharedFolds
	SharedScatterMin = sharedScatterMin
)

// SharedScatterFrom is sharedScatterFrom.
var SharedScatterFrom = sharedScatterFrom

// MarkBusy marks c as in a collective call on this rank, as a call from
// another goroutine would while it runs; false clears it.
func MarkBusy(c *spmd.Comm, busy bool) { stateOf(c.Collective()).busy = busy }

// SetChecking turns GORUN_CHECK_COLLECTIVES's check on or off; call it
// between jobs, not while ranks run.
func SetChecking(on bool) { checking = on }
