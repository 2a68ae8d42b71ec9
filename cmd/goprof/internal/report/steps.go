package report

import (
	"sort"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// StepRegion is the name of the region a training driver marks each step
// with; the regions inside it on the main track are its computation,
// except those named WaitRegion, where a driver waits for communication.
const (
	StepRegion = "step"
	WaitRegion = "wait"
)

// steps breaks each rank's steps down: computation is the time inside the
// regions within the step on the main track (forward, backward, optimizer;
// not wait) less the blocking communication there; communication is every
// communication call, blocking or in flight on an executor; overlapped
// communication is communication during computation, exposed the rest;
// idle is neither. The first step of two or more is left out (Warmup).
func (r *Report) steps(j *job.Job) {
	step, ok := j.Lookup(StepRegion)
	if !ok {
		return
	}
	wait, hasWait := j.Lookup(WaitRegion)
	var b StepBreakdown
	for _, x := range j.Present() {
		var windows []span
		var regions, blocked, all spans
		for i := range x.Events {
			e := &x.Events[i]
			switch {
			case e.Kind == trace.RegionEvent && e.Name == step && e.Track == 0:
				windows = append(windows, span{e.Start, e.End})
			case e.Kind == trace.RegionEvent && e.Track == 0 && !(hasWait && e.Name == wait):
				regions = append(regions, span{e.Start, e.End})
			case IsComm(e):
				all = append(all, span{e.Start, e.End})
				if blocking(e) && e.Track == 0 {
					blocked = append(blocked, span{e.Start, e.End})
				}
			}
		}
		if len(windows) == 0 {
			continue
		}
		warm := Warmup(len(windows))
		windows = windows[warm:]
		b.Warmup = max(b.Warmup, warm)
		blocked = blocked.union()
		all = all.union()
		sort.Slice(regions, func(a, b int) bool { return regions[a].a < regions[b].a })
		s := StepRank{Rank: x.Rank, Steps: len(windows)}
		for _, w := range windows {
			// The regions that start in the window, found by bisection:
			// a job's steps times its regions would be quadratic.
			var inner spans
			for i := sort.Search(len(regions), func(i int) bool { return regions[i].a >= w.a }); i < len(regions) && regions[i].a <= w.b; i++ {
				if g := regions[i]; g.b <= w.b && (g.a > w.a || g.b < w.b) {
					inner = append(inner, g)
				}
			}
			compute := inner.union().minus(blocked.near(w))
			cm := all.near(w).clip(w.a, w.b)
			over := cm.intersect(compute).length()
			exposed := cm.length() - over
			s.Step += w.b - w.a
			s.Compute += compute.length()
			s.Overlapped += over
			s.Exposed += exposed
			s.Idle += (w.b - w.a) - compute.length() - exposed
		}
		n := int64(s.Steps)
		s.Step, s.Compute, s.Overlapped, s.Exposed, s.Idle = s.Step/n, s.Compute/n, s.Overlapped/n, s.Exposed/n, s.Idle/n
		b.PerRank = append(b.PerRank, s)
		b.Steps = max(b.Steps, s.Steps)
	}
	if len(b.PerRank) == 0 {
		return
	}
	n := int64(len(b.PerRank))
	for _, s := range b.PerRank {
		b.Step += s.Step
		b.Compute += s.Compute
		b.Overlapped += s.Overlapped
		b.Exposed += s.Exposed
		b.Idle += s.Idle
	}
	b.Step, b.Compute, b.Overlapped, b.Exposed, b.Idle = b.Step/n, b.Compute/n, b.Overlapped/n, b.Exposed/n, b.Idle/n
	if c := b.Overlapped + b.Exposed; c > 0 {
		b.Hidden = float64(b.Overlapped) / float64(c)
	}
	r.Steps = &b
}
