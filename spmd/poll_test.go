package spmd

import (
	"testing"
	"time"
)

// A request polls for the small messages' budget plus what its bytes take
// at 1 GB/s, at most maxSizeBudget more; on a crowded host for the crowded
// budget whatever its size.
func TestBudgetFor(t *testing.T) {
	for _, c := range []struct {
		n       int
		crowded bool
		want    time.Duration
	}{
		{0, false, pollBudget},
		{8, false, pollBudget + 8*time.Nanosecond},
		{1 << 20, false, pollBudget + (1<<20)*time.Nanosecond},
		{64 << 20, false, pollBudget + maxSizeBudget},
		{0, true, crowdedPollBudget},
		{64 << 20, true, crowdedPollBudget},
	} {
		if got := budgetFor(c.n, c.crowded); got != c.want {
			t.Errorf("budgetFor(%d, crowded %v) = %v, want %v", c.n, c.crowded, got, c.want)
		}
	}
}
