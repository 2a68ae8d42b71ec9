package prims

import "github.com/gorun-hpc/gorun/spmd"

// Queued reports whether c has non-blocking collectives queued on this
// rank, and so an executor goroutine running them.
func Queued(c *spmd.Comm) bool {
	return stateOf(c.Collective()).q.busy.Load()
}

// SameState reports whether a and b share prims's state on this rank.
func SameState(a, b *spmd.Comm) bool {
	return stateOf(a.Collective()) == stateOf(b.Collective())
}
