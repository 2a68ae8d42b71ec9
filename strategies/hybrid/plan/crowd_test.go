package plan

import (
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// TestReplicated: the work every TP rank repeats does not shrink with TP,
// and does with sequence parallelism.
func TestReplicated(t *testing.T) {
	job := Job{Model: nn.GPTConfig{Vocab: 64, Context: 16, Layers: 4, Heads: 4, Dim: 32}, Seq: 16, GlobalBatch: 8, Ranks: 4}
	mc := Machine{Flops: 1e300, Replicated: 1e-6}
	const tokens = 8 * 16 // the whole batch: every layout here has one replica
	for _, tc := range []struct {
		l    Layout
		want float64
	}{
		{Layout{TP: 4, PP: 1, DP: 1, Micro: 1, Schedule: Schedule1F1B, Virtual: 1}, 4 * tokens * 1e-6},
		{Layout{TP: 4, PP: 1, DP: 1, Micro: 1, Schedule: Schedule1F1B, Virtual: 1, SeqParallel: true}, 4 * tokens * 1e-6 / 4},
		{Layout{TP: 1, PP: 4, DP: 1, Micro: 1, Schedule: Schedule1F1B, Virtual: 1}, tokens * 1e-6},
	} {
		if err := job.Check(tc.l); err != nil {
			t.Fatal(err)
		}
		if got := EstimateLayout(job, mc, tc.l).Compute; !near(got, tc.want) {
			t.Errorf("%v: compute %g s, want %g", tc.l, got, tc.want)
		}
	}
}

// TestCrowdedHost: 8 ranks on a host of 2 cores. The host's work over its
// cores bounds the compute, a pipeline's idle stages lend their cores (the
// bubble shrinks or vanishes), and messages inside the host pay Wake per
// rank beyond the cores.
func TestCrowdedHost(t *testing.T) {
	job := Job{Model: nn.GPTConfig{Vocab: 64, Context: 16, Layers: 8, Heads: 4, Dim: 32}, Seq: 16, GlobalBatch: 16, Ranks: 8, RanksPerHost: 8}
	alone := Machine{Flops: 1e9}
	crowded := Machine{Flops: 1e9, Cores: 2}
	dp := Layout{TP: 1, PP: 1, DP: 8, Micro: 1, Schedule: Schedule1F1B, Virtual: 1}
	pp := Layout{TP: 1, PP: 8, DP: 1, Micro: 2, Schedule: Schedule1F1B, Virtual: 1}
	for _, l := range []Layout{dp, pp} {
		if err := job.Check(l); err != nil {
			t.Fatal(err)
		}
	}
	a, c := EstimateLayout(job, alone, dp), EstimateLayout(job, crowded, dp)
	if !near(c.Compute, 4*a.Compute) || c.Bubble != 0 {
		t.Errorf("pure DP on 8 ranks of 2 cores: compute %g, want 4 x %g; bubble %g, want 0", c.Compute, a.Compute, c.Bubble)
	}
	a, c = EstimateLayout(job, alone, pp), EstimateLayout(job, crowded, pp)
	// Alone: 2 micro-batches through 8 stages, bubble 7/9 of the step.
	if !near(a.Bubble/a.Step, 7.0/9) {
		t.Fatalf("pp8 m2 alone: bubble %.3f of the step, want 7/9", a.Bubble/a.Step)
	}
	// Crowded: the host's work is the 8 stages' 2 micro-batches over 2
	// cores (about 8 micro-batch times of one stage, the last's head
	// making it more); the span is 9 of the slowest stage's; the bubble
	// is what is left.
	var work, slow float64
	for s := range 8 {
		c := job.stageTime(crowded, pp, s).compute
		work += 2 * c
		slow = max(slow, c)
	}
	if !near(c.Compute, work/2) || !near(c.Bubble, 9*slow-work/2) || c.Bubble <= 0 || c.Bubble >= a.Bubble {
		t.Errorf("pp8 m2 crowded: compute %g bubble %g, want %g and %g (less than alone, %g)", c.Compute, c.Bubble, work/2, 9*slow-work/2, a.Bubble)
	}
	w := Machine{Flops: 1e300, AlphaNear: 1e-6, Cores: 2, Wake: 1e-5}
	tp := Layout{TP: 2, PP: 1, DP: 4, Micro: 1, Schedule: Schedule1F1B, Virtual: 1}
	free := w
	free.Wake = 0
	got, base := EstimateLayout(job, w, tp).TPComm, EstimateLayout(job, free, tp).TPComm
	// A 2-rank ring all-reduce sends 2 messages; each waits 6 x Wake more.
	reduces := 4.0*8 + 1 + 1 + 3
	if !near(got-base, reduces*2*6*1e-5) {
		t.Errorf("tp comm %g with Wake, %g without: want %g more", got, base, reduces*2*6*1e-5)
	}
}
