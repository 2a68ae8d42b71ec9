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
