package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Estimate is the model of one layout: its step time, in parts, and what
// its most loaded rank holds. Its String is the layout's.
type Estimate struct {
	Layout

	Step      float64 // modelled seconds per optimizer step, the sum of the parts below
	Compute   float64 // seconds of forward and backward arithmetic on the slowest stage
	TPComm    float64 // seconds of TP collectives on that stage
	PPComm    float64 // seconds of pipeline sends on that stage
	Bubble    float64 // seconds the schedule leaves stages idle
	DPComm    float64 // seconds of the DP gradient collectives (not overlapped)
	Optimizer float64 // seconds of the AdamW step

	// Bytes held by the rank that holds the most (stage 0 or the last,
	// TP rank 0): the parts of that rank, so that Memory is a real rank's.
	Params, Grads, Optim, Activations int64
	Memory                            int64 // their sum
	Fits                              bool  // Memory is within Job.MemPerRank, or there is no limit

	Reasons      []string // short phrases: what dominates the step, what crosses hosts, what broke the limit
	TokensPerSec float64  // GlobalBatch·Seq / Step
}

// EstimateLayout models the layout l of the job on the machine (see the
// package documentation for the formulas). If the job, the machine or
// the layout is not valid it returns an estimate that does not fit, with
// an infinite Step and the error as its one reason.
func EstimateLayout(job Job, m Machine, l Layout) Estimate {
	err := job.Validate()
	if err == nil {
		err = m.Validate()
	}
	if err == nil {
		err = job.Check(l)
	}
	if err != nil {
		return Estimate{Layout: l, Step: math.Inf(1), Reasons: []string{err.Error()}}
	}
	e := Estimate{Layout: l}
	job.estimateTime(m, &e)
	job.estimateMemory(m, &e)
	e.TokensPerSec = float64(job.GlobalBatch) * float64(job.Seq) / e.Step
	e.Reasons = append(e.Reasons, job.reasons(e)...)
	return e
}

// EstimateMemory models only what the most loaded rank of layout l holds:
// the Params, Grads, Optim, Activations, Memory and Fits of an Estimate,
// its times left 0, with the activation coefficients c (the zero value
// means DefaultCoeffs). It needs no measured machine, so that a program
// can check a configuration before it allocates it, and it is lenient
// where the memory does not depend on it: a layout Check refuses for a
// TP wider than a host or ZeRO over one replica is estimated. It fails,
// wrapping ErrJob or ErrLayout, for an invalid job, or a layout whose
// degrees are not positive, that does not cut the batch into DP·Micro or
// the layers into PP·Virtual chunks, or whose ZeRO stage is not 0-3.
func EstimateMemory(job Job, l Layout, c Coeffs) (Estimate, error) {
	if err := job.Validate(); err != nil {
		return Estimate{}, err
	}
	bad := func(format string, a ...any) (Estimate, error) {
		return Estimate{}, errorf(ErrLayout, "plan: layout %v: "+format, append([]any{l}, a...)...)
	}
	switch {
	case l.TP < 1 || l.PP < 1 || l.DP < 1 || l.Micro < 1 || l.Virtual < 1:
		return bad("TP, PP, DP, Micro and Virtual must be 1 or more")
	case job.microBatch(l) == 0:
		return bad("DP·Micro %d does not divide the global batch %d", l.DP*l.Micro, job.GlobalBatch)
	case job.Model.Layers%(l.PP*l.Virtual) != 0:
		return bad("PP·Virtual %d does not divide the %d layers", l.PP*l.Virtual, job.Model.Layers)
	case l.Zero < 0 || l.Zero > 3:
		return bad("ZeRO stage %d: pass 0 to 3", l.Zero)
	case job.Model.Vocab < l.TP:
		return bad("TP %d is more than the vocabulary of %d", l.TP, job.Model.Vocab)
	}
	e := Estimate{Layout: l}
	job.estimateMemory(Machine{Coeffs: c}, &e)
	return e, nil
}

// estimateTime fills in the step and its parts: each micro-batch takes
// t_mb, the slowest stage's compute + TP + PP time, and the pipeline
// (m + (p-1)/v)·t_mb under 1F1B and interleaving, (m + p - 1)·t_mb under
// GPipe, of which the (p-1)/v·t_mb or (p-1)·t_mb is the bubble; then the
// slowest stage's DP communication and optimizer step.
//
// On a host with more ranks than cores (Machine.Cores) the host's cores
// bound its ranks: the compute and optimizer work of all its ranks,
// at one rank's speed, over its cores, is the least the compute can
// take, and a pipeline's idle stages lend their cores to the others, so
// the bubble counts only as far as the pipeline's span exceeds that bound.
func (j Job) estimateTime(mc Machine, e *Estimate) {
	l := e.Layout
	var slow stageTime
	work := make([]float64, l.PP) // per stage, a rank's compute and optimizer work per step
	for s := range l.PP {
		st := j.stageTime(mc, l, s)
		if s == 0 || st.total() > slow.total() {
			slow = st
		}
		opt := j.optimizerTime(mc, l, s)
		work[s] = float64(l.Micro)*st.compute + opt
		e.DPComm = max(e.DPComm, j.dpTime(mc, l, s))
		e.Optimizer = max(e.Optimizer, opt)
	}
	m := float64(l.Micro)
	e.Compute, e.TPComm, e.PPComm = m*slow.compute, m*slow.tp, m*slow.pp
	fill := float64(l.PP-1) / float64(l.Virtual)
	if l.Schedule == ScheduleGPipe {
		fill = float64(l.PP - 1)
	}
	e.Bubble = fill * slow.total()
	if host := j.hostWork(mc, l, work); host > e.Compute+e.Optimizer {
		// The host's cores, not the pipeline, bound the step: its compute
		// takes the host's work over its cores; its stages' idle time is
		// filled as far as that lasts.
		span := e.Compute + e.Optimizer + e.Bubble
		e.Compute = host - e.Optimizer
		e.Bubble = max(0, span-host)
	}
	e.Step = e.Compute + e.TPComm + e.PPComm + e.Bubble + e.DPComm + e.Optimizer
}

// hostWork is the compute and optimizer work of the busiest host's ranks
// per step, at one rank's speed, over its cores; 0 when no host has more
// ranks than cores.
func (j Job) hostWork(mc Machine, l Layout, work []float64) float64 {
	if mc.crowding(j.perHost()) == 1 {
		return 0
	}
	hosts := map[int]float64{}
	for s := range l.PP {
		for k := range l.DP {
			for t := range l.TP {
				hosts[j.host(rankOf(l, s, k, t))] += work[s]
			}
		}
	}
	most := 0.0
	for _, w := range hosts {
		most = max(most, w)
	}
	return most / float64(mc.Cores)
}

// estimateMemory fills in the bytes of the rank that holds the most.
func (j Job) estimateMemory(mc Machine, e *Estimate) {
	var most memory
	for s := range e.PP {
		if m := j.stageMemory(mc, e.Layout, s); s == 0 || m.total() > most.total() {
			most = m
		}
	}
	e.Params, e.Grads, e.Optim, e.Activations = most.params, most.grads, most.optim, most.act
	e.Memory = most.total()
	e.Fits = j.MemPerRank == 0 || e.Memory <= j.MemPerRank
}

// reasons names what broke the memory limit, the largest part of the
// step and the second if it is 1% or more, with their shares, and the
// groups that cross hosts.
func (j Job) reasons(e Estimate) []string {
	var out []string
	if !e.Fits {
		part := slices.MaxFunc([]named[int64]{
			{"params", e.Params}, {"grads", e.Grads}, {"optimizer state", e.Optim}, {"activations", e.Activations},
		}, func(a, b named[int64]) int { return cmp.Compare(a.v, b.v) })
		out = append(out, fmt.Sprintf("%s %s of %s > limit %s",
			part.name, GiB(part.v), GiB(e.Memory), GiB(j.MemPerRank)))
	}
	parts := []named[float64]{
		{"compute", e.Compute}, {"tp comm", e.TPComm}, {"pp comm", e.PPComm},
		{"bubble", e.Bubble}, {"dp comm", e.DPComm}, {"optimizer", e.Optimizer},
	}
	slices.SortStableFunc(parts, func(a, b named[float64]) int { return cmp.Compare(b.v, a.v) })
	for i, p := range parts[:2] {
		share := 100 * p.v / e.Step
		if e.Step > 0 && (i == 0 || share >= 1) {
			out = append(out, fmt.Sprintf("%s %.0f%% of step", p.name, share))
		}
	}
	return append(out, j.crossings(e.Layout)...)
}

// crossings names the groups of l whose messages cross hosts.
func (j Job) crossings(l Layout) []string {
	var tp, pp, dp bool
	for s := range l.PP {
		tp = tp || (l.TP > 1 && j.tpCrosses(l, s))
		dp = dp || (l.DP > 1 && j.dpCrosses(l, s))
		next := s + 1
		if next == l.PP && l.Schedule == ScheduleInterleaved {
			next = 0 // the last chunk of the last rank feeds the next chunk of the first
		}
		pp = pp || (next < l.PP && next != s && j.ppCrosses(l, s, next))
	}
	var out []string
	if tp {
		out = append(out, "tp all-reduces cross hosts")
	}
	if pp {
		out = append(out, "pp sends cross hosts")
	}
	if dp {
		out = append(out, "dp collectives cross hosts")
	}
	return out
}

// named is a value with its name, for picking the largest.
type named[T cmp.Ordered] struct {
	name string
	v    T
}

// GiB formats bytes as GiB with one decimal, or MiB below one GiB.
func GiB(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
