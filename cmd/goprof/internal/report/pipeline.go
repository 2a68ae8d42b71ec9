package report

import (
	"fmt"
	"slices"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// The regions a pipeline executor (strategies/pipe) marks: the whole
// schedule of a step, and each operation of it.
const (
	PipelineRegion = "pipeline"
	ForwardRegion  = "pipe forward"
	BackwardRegion = "pipe backward"
)

// Pipeline is the bubble of a pipelined job: for the k-th pipeline region
// of every rank (its k-th step), the span from the earliest start to the
// latest end over the ranks, and each rank's time inside its forward and
// backward operations there; a rank's bubble is the share of the spans it
// did not compute, what the schedule's (p-1)/(m+p-1) predicts. Of two
// steps or more the first (warm-up: the stages build their activation
// slots) is left out, as examples/gpt --stats leaves it out.
type Pipeline struct {
	Steps   int            `json:"steps"`                 // measured
	Warmup  int            `json:"warmup_steps_left_out"` // the first steps, not measured
	Span    int64          `json:"mean_span_ns"`
	Bubble  float64        `json:"bubble"`        // mean over ranks, the measured steps
	Median  float64        `json:"median_bubble"` // median over the measured steps of the ranks' mean
	PerRank []PipelineRank `json:"per_rank"`
}

// PipelineRank is one rank's share.
type PipelineRank struct {
	Rank   int     `json:"rank"`
	Busy   int64   `json:"mean_busy_ns"` // per step
	Bubble float64 `json:"bubble"`
}

// pipeline finds the job's pipeline regions and measures its bubble.
func (r *Report) pipeline(j *job.Job) {
	whole, ok := j.Lookup(PipelineRegion)
	if !ok {
		return
	}
	fw, _ := j.Lookup(ForwardRegion)
	bw, _ := j.Lookup(BackwardRegion)
	type rankSteps struct {
		rank    int
		windows []span
		busy    []int64
	}
	var ranks []rankSteps
	steps := -1
	for _, x := range j.Present() {
		rs := rankSteps{rank: x.Rank}
		var ops []span
		for i := range x.Events {
			e := &x.Events[i]
			if e.Kind != trace.RegionEvent {
				continue
			}
			switch e.Name {
			case whole:
				rs.windows = append(rs.windows, span{e.Start, e.End})
			case fw, bw:
				ops = append(ops, span{e.Start, e.End})
			}
		}
		if len(rs.windows) == 0 {
			continue
		}
		for _, w := range rs.windows {
			var n int64
			for _, o := range ops {
				if o.a >= w.a && o.b <= w.b {
					n += o.b - o.a
				}
			}
			rs.busy = append(rs.busy, n)
		}
		if steps < 0 || len(rs.windows) < steps {
			steps = len(rs.windows)
		}
		ranks = append(ranks, rs)
	}
	if len(ranks) == 0 || steps == 0 {
		return
	}
	warm := Warmup(steps)
	for i := range ranks {
		ranks[i].windows, ranks[i].busy = ranks[i].windows[warm:], ranks[i].busy[warm:]
	}
	steps -= warm
	p := &Pipeline{Steps: steps, Warmup: warm}
	spans := make([]int64, steps)
	var total int64
	for k := range steps {
		a, b := ranks[0].windows[k].a, ranks[0].windows[k].b
		for _, rs := range ranks[1:] {
			a, b = min(a, rs.windows[k].a), max(b, rs.windows[k].b)
		}
		spans[k] = b - a
		total += b - a
	}
	if total == 0 {
		return
	}
	perStep := make([]float64, steps)
	for _, rs := range ranks {
		var busy int64
		for k := range steps {
			busy += rs.busy[k]
			if spans[k] > 0 {
				perStep[k] += 1 - float64(rs.busy[k])/float64(spans[k])
			}
		}
		share := 1 - float64(busy)/float64(total)
		p.PerRank = append(p.PerRank, PipelineRank{Rank: rs.rank, Busy: busy / int64(steps), Bubble: share})
		p.Bubble += share / float64(len(ranks))
	}
	for k := range perStep {
		perStep[k] /= float64(len(ranks))
	}
	slices.Sort(perStep)
	p.Median = perStep[steps/2]
	if steps%2 == 0 {
		p.Median = (perStep[steps/2-1] + perStep[steps/2]) / 2
	}
	p.Span = total / int64(steps)
	r.Pipeline = p
}

func (r *Report) textPipeline(w *textWriter) {
	p := r.Pipeline
	if p == nil {
		return
	}
	w.printf("\nPipeline (%s%s; span: the first rank's start to the last rank's end of a step's schedule;\n", plural(p.Steps, "step"), warmupNote(p.Warmup))
	w.printf("  a rank's bubble: the share of the spans it spent outside its forward and backward operations)\n")
	w.printf("  span %s a step, bubble %s of it (median step %s)\n", Dur(p.Span), pct(p.Bubble), pct(p.Median))
	var rows []string
	for _, x := range p.PerRank {
		rows = append(rows, fmt.Sprintf("%d\t%s\t%s", x.Rank, Dur(x.Busy), pct(x.Bubble)))
	}
	w.table("  per rank", "rank\tbusy a step\tbubble", rows)
}

// Warmup is how many of a rank's first steps the step breakdown and the
// pipeline's bubble leave out: the first of two or more, whose time goes
// to warming up (buffers, slots, the algorithms' first choice), as the
// examples' own measures leave it out.
func Warmup(steps int) int {
	if steps > 1 {
		return 1
	}
	return 0
}

// warmupNote says, after the count of steps measured, that the first was
// left out.
func warmupNote(n int) string {
	if n == 0 {
		return ""
	}
	return ", after the first (warm-up)"
}
