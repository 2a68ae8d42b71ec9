package main

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gorun-hpc/gorun/strategies/dp"
)

// timeline collects DDP's step events and sums, over the steps after the
// first, how long gradients were being reduced and how much of that ran
// while backward was still computing. A bucket is being reduced from its
// issue (dp.BucketIssued: queued on the executor) until a goroutine saw
// its completion (dp.BucketReduced), which on a busy core runs late; the
// union of those spans is the denominator, its part before
// dp.BackwardEnd the hidden share. goprof report's "communication hidden
// behind computation" differs: over every rank, it times each collective
// from its start on the executor to its end, and counts as hidden what
// ran inside the step's forward, backward and optimizer regions.
type timeline struct {
	mu sync.Mutex
	// protects following
	events []dp.Event
	steps  int
	busy   time.Duration // reductions in flight, the union of their spans
	hidden time.Duration // the part of busy before backward ended
}

func (t *timeline) observe(e dp.Event) {
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
}

// endStep folds one step's events into the sums; the first step (warm-up)
// is left out.
func (t *timeline) endStep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	evs := t.events
	t.events = nil
	t.steps++
	if t.steps == 1 {
		return
	}
	var bwdEnd time.Time
	issued := map[int]time.Time{}
	var spans [][2]time.Time
	for _, e := range evs {
		switch e.Kind {
		case dp.BackwardEnd:
			bwdEnd = e.Time
		case dp.BucketIssued:
			issued[e.Bucket] = e.Time
		case dp.BucketReduced:
			spans = append(spans, [2]time.Time{issued[e.Bucket], e.Time})
		}
	}
	busy, hidden := union(spans, bwdEnd)
	t.busy += busy
	t.hidden += hidden
}

// union is the length of the union of spans, and of its part before cut.
func union(spans [][2]time.Time, cut time.Time) (total, before time.Duration) {
	sort.Slice(spans, func(i, j int) bool { return spans[i][0].Before(spans[j][0]) })
	var end time.Time
	for _, s := range spans {
		a, b := s[0], s[1]
		if a.Before(end) {
			a = end
		}
		if !b.After(a) {
			continue
		}
		total += b.Sub(a)
		if a.Before(cut) {
			stop := b
			if stop.After(cut) {
				stop = cut
			}
			before += stop.Sub(a)
		}
		end = b
	}
	return total, before
}

func (t *timeline) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.steps - 1
	if n < 1 || t.busy == 0 {
		return "all-reduce: too few steps to measure"
	}
	return fmt.Sprintf("all-reduce %.3f ms/step, %.0f%% of it hidden behind backward (rank 0, %d steps after the first; a bucket in flight from its issue until its completion was seen)",
		float64(t.busy.Microseconds())/1e3/float64(n), 100*float64(t.hidden)/float64(t.busy), n)
}
