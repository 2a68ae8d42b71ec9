package plan

import (
	"errors"
	"fmt"
	"strings"
)

// The pipeline schedules a Layout names.
const (
	ScheduleGPipe       = "gpipe"       // all forwards, then all backwards
	Schedule1F1B        = "1f1b"        // PipeDream-flush: one forward, one backward in the steady state
	ScheduleInterleaved = "interleaved" // Megatron's interleaved 1F1B over Virtual chunks per rank
)

// Layout is one way to run the job. The mesh orders ranks TP innermost,
// then DP, then PP: rank s·TP·DP + k·TP + t is TP rank t of DP replica k
// in pipeline stage s.
type Layout struct {
	TP, PP, DP  int    // the degrees; TP·PP·DP == Job.Ranks
	Zero        int    // ZeRO stage 0-3 across DP (0 is DDP)
	Micro       int    // micro-batches per step on each pipeline (m)
	Schedule    string // ScheduleGPipe, Schedule1F1B or ScheduleInterleaved; Schedule1F1B when PP == 1
	Virtual     int    // v, the chunks of layers per rank; 1 unless interleaved
	SeqParallel bool   // Megatron's sequence parallelism (needs TP > 1)
}

// String is a compact name, such as "tp2 pp2 dp2 zero1 m4 1f1b", with
// " v2" for the chunks of an interleaved schedule and " sp" for sequence
// parallelism.
func (l Layout) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tp%d pp%d dp%d zero%d m%d %s", l.TP, l.PP, l.DP, l.Zero, l.Micro, l.Schedule)
	if l.Schedule == ScheduleInterleaved {
		fmt.Fprintf(&b, " v%d", l.Virtual)
	}
	if l.SeqParallel {
		b.WriteString(" sp")
	}
	return b.String()
}

// microBatch is the sequences of one micro-batch, GlobalBatch/DP/Micro;
// 0 if the layout does not cut the batch.
func (j Job) microBatch(l Layout) int {
	if l.DP < 1 || l.Micro < 1 || j.GlobalBatch%l.DP != 0 || (j.GlobalBatch/l.DP)%l.Micro != 0 {
		return 0
	}
	return j.GlobalBatch / l.DP / l.Micro
}

// Check reports every reason the engine would not run the layout for the
// job, each wrapping ErrLayout, joined; nil if it would. The job itself
// is assumed valid (see Validate).
func (j Job) Check(l Layout) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, errorf(ErrLayout, format, a...)) }
	if l.TP < 1 || l.PP < 1 || l.DP < 1 {
		bad("plan: layout %v: TP, PP and DP must be 1 or more", l)
		return errors.Join(errs...)
	}
	if l.TP*l.PP*l.DP != j.Ranks {
		bad("plan: layout %v: TP·PP·DP is %d, not the job's %d ranks", l, l.TP*l.PP*l.DP, j.Ranks)
	}
	if j.Model.Heads%l.TP != 0 {
		bad("plan: layout %v: TP %d does not divide the %d heads", l, l.TP, j.Model.Heads)
	}
	if l.TP > j.perHost() {
		bad("plan: layout %v: TP %d is more than the %d ranks of a host", l, l.TP, j.perHost())
	}
	j.checkPipeline(l, bad)
	j.checkBatch(l, bad)
	return errors.Join(errs...)
}

// checkPipeline checks the schedule, the chunks and the layers.
func (j Job) checkPipeline(l Layout, bad func(string, ...any)) {
	switch {
	case l.Virtual < 1:
		bad("plan: layout %v: Virtual %d: pass 1, or the chunks per rank if interleaved", l, l.Virtual)
		return
	case l.PP > j.Model.Layers:
		bad("plan: layout %v: PP %d is more than the %d layers", l, l.PP, j.Model.Layers)
	case j.Model.Layers%(l.PP*l.Virtual) != 0:
		bad("plan: layout %v: PP·Virtual %d does not divide the %d layers", l, l.PP*l.Virtual, j.Model.Layers)
	}
	switch l.Schedule {
	case Schedule1F1B, ScheduleGPipe:
		if l.Virtual != 1 {
			bad("plan: layout %v: Virtual %d needs the interleaved schedule", l, l.Virtual)
		}
		if l.PP == 1 && l.Schedule != Schedule1F1B {
			bad("plan: layout %v: with PP 1 the schedule is %q", l, Schedule1F1B)
		}
	case ScheduleInterleaved:
		if l.PP == 1 || l.Virtual < 2 {
			bad("plan: layout %v: interleaving needs PP > 1 and Virtual 2 or more", l)
		}
		if l.Micro > 0 && l.Micro%l.PP != 0 {
			bad("plan: layout %v: interleaving needs Micro %d to be a multiple of PP %d", l, l.Micro, l.PP)
		}
	default:
		bad("plan: layout %v: schedule %q: pass %q, %q or %q", l, l.Schedule,
			ScheduleGPipe, Schedule1F1B, ScheduleInterleaved)
	}
}

// checkBatch checks the batch's cut, ZeRO and sequence parallelism.
func (j Job) checkBatch(l Layout, bad func(string, ...any)) {
	mb := j.microBatch(l)
	if mb == 0 {
		bad("plan: layout %v: DP·Micro %d does not divide the global batch %d", l, l.DP*max(l.Micro, 0), j.GlobalBatch)
	}
	switch {
	case l.Zero < 0 || l.Zero > 3:
		bad("plan: layout %v: ZeRO stage %d: pass 0 to 3", l, l.Zero)
	case l.Zero > 0 && l.DP == 1:
		bad("plan: layout %v: ZeRO shards over DP, which is 1: pass Zero 0", l)
	case l.Zero >= 2 && l.PP > 1:
		bad("plan: layout %v: ZeRO stage %d needs PP 1", l, l.Zero)
	}
	if l.SeqParallel && l.TP == 1 {
		bad("plan: layout %v: sequence parallelism needs TP > 1", l)
	} else if l.SeqParallel && mb > 0 && mb*j.Seq%l.TP != 0 {
		bad("plan: layout %v: sequence parallelism needs TP %d to divide the %d tokens of a micro-batch", l, l.TP, mb*j.Seq)
	}
}

// Layouts returns every layout of the job that Check accepts with Micro
// in {1, 2, 4, 8, 16, 32} and, when interleaved, Virtual in {2, 4}:
// ordered by TP, PP, Micro, schedule (GPipe, 1F1B, interleaved by
// Virtual), Zero, and sequence parallelism off before on. It returns nil
// if the job is not valid.
func Layouts(job Job) []Layout {
	if job.Validate() != nil {
		return nil
	}
	var out []Layout
	for _, tp := range divisors(job.Ranks) {
		for _, pp := range divisors(job.Ranks / tp) {
			dp := job.Ranks / tp / pp
			for _, m := range []int{1, 2, 4, 8, 16, 32} {
				for _, l := range candidates(tp, pp, dp, m) {
					if job.Check(l) == nil {
						out = append(out, l)
					}
				}
			}
		}
	}
	return out
}

// candidates are the layouts of the degrees and micro-batches, valid or
// not, in Layouts' order.
func candidates(tp, pp, dp, m int) []Layout {
	type sched struct {
		name string
		v    int
	}
	scheds := []sched{{Schedule1F1B, 1}}
	if pp > 1 {
		scheds = []sched{{ScheduleGPipe, 1}, {Schedule1F1B, 1}, {ScheduleInterleaved, 2}, {ScheduleInterleaved, 4}}
	}
	var out []Layout
	for _, s := range scheds {
		for zero := range 4 {
			for _, sp := range []bool{false, true} {
				out = append(out, Layout{TP: tp, PP: pp, DP: dp, Zero: zero, Micro: m,
					Schedule: s.name, Virtual: s.v, SeqParallel: sp})
			}
		}
	}
	return out
}

// divisors returns the divisors of n in increasing order.
func divisors(n int) []int {
	var out []int
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			out = append(out, d)
		}
	}
	return out
}
