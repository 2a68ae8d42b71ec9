package spmd

import (
	"context"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// PollBudget is how long WaitShared polls before it sleeps, on a host
// with no more ranks than cores.
func PollBudget() time.Duration { return pollBudget }

// SetSharedNap sets how long WaitShared sleeps between looks at its context
// and its peer, and returns what restores it.
func SetSharedNap(d time.Duration) (restore func()) {
	old := sharedNap
	sharedNap = d
	return func() { sharedNap = old }
}

// Queued counts the receives posted and the messages kept unreceived on
// both contexts of c.
func Queued(c *Comm) int {
	e, base := c.core.engine, c.base()
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for k, q := range e.queues {
		if k.comm == base || k.comm == base+1 {
			n += q.posted.len() + q.unexp.len()
		}
	}
	return n
}

// SyncClock measures w's clock offset to rank 0 into rec, as Init does
// under gorun --profile.
func SyncClock(ctx context.Context, w *World, rec *trace.Recorder) error {
	return w.syncClock(ctx, rec)
}
