package plan

import (
	"errors"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// TestParamsSum checks that the ranks of one DP replica hold the model's
// parameters, the replicated ones TP times, including a vocabulary that
// TP does not divide.
func TestParamsSum(t *testing.T) {
	tests := []struct {
		name   string
		model  nn.GPTConfig
		layout Layout
	}{
		{"tp1 pp1", nn.GPTConfig{Vocab: 256, Context: 64, Layers: 4, Heads: 4, Dim: 64}, Layout{TP: 1, PP: 1, DP: 1}},
		{"tp2 pp2", nn.GPTConfig{Vocab: 256, Context: 64, Layers: 4, Heads: 4, Dim: 64}, Layout{TP: 2, PP: 2, DP: 1}},
		{"tp4 pp4 uneven vocab", nn.GPTConfig{Vocab: 250, Context: 40, Layers: 8, Heads: 8, Dim: 48}, Layout{TP: 4, PP: 4, DP: 1}},
		{"tp3 pp1 uneven vocab", nn.GPTConfig{Vocab: 101, Context: 16, Layers: 2, Heads: 6, Dim: 36}, Layout{TP: 3, PP: 1, DP: 1}},
		{"gpt2 tp4 pp3", nn.DefaultGPTConfig(), Layout{TP: 4, PP: 3, DP: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := Job{Model: tt.model}
			var sum int64
			for s := range tt.layout.PP {
				for r := range tt.layout.TP {
					sum += job.rankUnits(tt.layout, s, r).total()
				}
			}
			want := int64(tt.model.NumParams()) + int64(tt.layout.TP-1)*job.replicated()
			if sum != want {
				t.Errorf("sum over ranks %d, want %d (NumParams %d + %d replicated × %d)",
					sum, want, tt.model.NumParams(), job.replicated(), tt.layout.TP-1)
			}
		})
	}
}

// zeroJob is a job whose state outweighs its activations: 8 ranks of
// pure DP.
func zeroJob() (Job, Machine) {
	job := Job{
		Model: nn.GPTConfig{Vocab: 4096, Context: 256, Layers: 8, Heads: 8, Dim: 256},
		Seq:   64, GlobalBatch: 16, Ranks: 8, RanksPerHost: 8,
	}
	return job, Machine{Flops: 1e11, AlphaNear: 5e-6, BetaNear: 1e-10, AlphaFar: 2e-5, BetaFar: 1e-9, MemBandwidth: 2e10}
}

func TestZeroMemory(t *testing.T) {
	job, mc := zeroJob()
	var e [4]Estimate
	for z := range 4 {
		e[z] = EstimateLayout(job, mc, Layout{TP: 1, PP: 1, DP: 8, Zero: z, Micro: 2, Schedule: Schedule1F1B, Virtual: 1})
		if len(e[z].Reasons) == 0 || e[z].Step <= 0 {
			t.Fatalf("zero%d: %+v", z, e[z])
		}
	}
	n := e[0].Params / bytesPerFloat     // the rank's parameters
	units := int64(job.Model.Layers + 1) // blocks, embeddings and head (one stage)
	unit := job.rankUnits(e[0].Layout, 0, 0).largest()
	checks := []struct {
		name      string
		got, want int64
		slack     int64 // padding allowed above want
	}{
		{"zero0 grads = params", e[0].Grads, e[0].Params, 0},
		{"zero0 optim = 2 params", e[0].Optim, 2 * e[0].Params, 0},
		{"zero1 params", e[1].Params, e[0].Params, 0},
		{"zero1 grads", e[1].Grads, e[0].Grads, 0},
		{"zero1 optim /8", e[1].Optim, e[0].Optim / 8, 8 * units},
		{"zero2 grads /8 + a unit", e[2].Grads, 4 * (n/8 + unit), 4 * units},
		{"zero2 optim", e[2].Optim, e[1].Optim, 0},
		{"zero3 params /8 + a unit", e[3].Params, 4 * (n/8 + unit), 4 * units},
		{"zero3 grads", e[3].Grads, e[2].Grads, 0},
	}
	for _, c := range checks {
		if c.got < c.want || c.got > c.want+c.slack {
			t.Errorf("%s: %d, want %d (+%d)", c.name, c.got, c.want, c.slack)
		}
	}
	for z := 1; z < 4; z++ {
		if e[z].Memory >= e[z-1].Memory {
			t.Errorf("zero%d memory %d not below zero%d's %d", z, e[z].Memory, z-1, e[z-1].Memory)
		}
		if e[z].Activations != e[0].Activations {
			t.Errorf("zero%d activations %d, zero0 %d", z, e[z].Activations, e[0].Activations)
		}
	}
}

// TestActivationsExact checks the formula on one rank: per block
// b·T·C·(16 + 25) + b·H·T²·2 floats, the embeddings b·T·C·2, the logits
// b·T·V·3; and sequence parallelism's Rep/TP on two.
func TestActivationsExact(t *testing.T) {
	model := nn.GPTConfig{Vocab: 100, Context: 32, Layers: 3, Heads: 2, Dim: 16}
	job := Job{Model: model, Seq: 32, GlobalBatch: 4, Ranks: 1}
	l := Layout{TP: 1, PP: 1, DP: 1, Micro: 2, Schedule: Schedule1F1B, Virtual: 1}
	b, T, C, H, V, L := 2, 32, 16, 2, 100, 3
	want := 4 * int64(L*(b*T*C*41+b*H*T*T*2)+b*T*C*2+b*T*V*3)
	if got := EstimateLayout(job, Machine{Flops: 1}, l).Activations; got != want {
		t.Errorf("tp1: activations %d, want %d", got, want)
	}

	job.Ranks = 2
	l.TP = 2
	sp := l
	sp.SeqParallel = true
	perBlock := func(rep float64) float64 { return float64(b*T*C)*(rep+25.0/2) + float64(b*H*T*T)*2/2 }
	rest := float64(b*T*C*2 + b*T*(V/2)*3)
	for _, c := range []struct {
		l   Layout
		rep float64
	}{{l, 16}, {sp, 8}} {
		want := toBytes(4 * (float64(L)*perBlock(c.rep) + rest))
		if got := EstimateLayout(job, Machine{Flops: 1}, c.l).Activations; got != want {
			t.Errorf("%v: activations %d, want %d", c.l, got, want)
		}
	}
}

// TestActivationsBySchedule keeps 1 sequence a micro-batch and grows the
// micro-batches: 1F1B's activations stay flat once m >= p, GPipe's grow
// as m.
func TestActivationsBySchedule(t *testing.T) {
	job := Job{
		Model: nn.GPTConfig{Vocab: 512, Context: 64, Layers: 8, Heads: 4, Dim: 64},
		Seq:   64, Ranks: 4, RanksPerHost: 4,
	}
	mc := Machine{Flops: 1e10}
	at := func(sched string, m int) (Estimate, int64) {
		job.GlobalBatch = m
		l := Layout{TP: 1, PP: 4, DP: 1, Micro: m, Schedule: sched, Virtual: 1}
		var most int64
		for s := range l.PP {
			most = max(most, job.actMemory(mc, l, s))
		}
		return EstimateLayout(job, mc, l), most
	}
	flat, _ := at(Schedule1F1B, 4)
	_, gpipe1 := at(ScheduleGPipe, 1)
	for _, m := range []int{4, 8, 16, 32} {
		e, _ := at(Schedule1F1B, m)
		if e.Activations != flat.Activations || e.Memory != flat.Memory {
			t.Errorf("1f1b m%d: activations %d memory %d, at m4 %d %d", m, e.Activations, e.Memory, flat.Activations, flat.Memory)
		}
		g, most := at(ScheduleGPipe, m)
		if most != int64(m)*gpipe1 {
			t.Errorf("gpipe m%d: most activations %d, want %d × %d", m, most, m, gpipe1)
		}
		if g.Activations <= e.Activations {
			t.Errorf("gpipe m%d: activations %d not above 1f1b's %d", m, g.Activations, e.Activations)
		}
	}
}

// TestEstimateMemory: without a machine it gives what EstimateLayout
// gives of memory; it estimates layouts Check refuses for reasons that do
// not change the memory (TP wider than a host, ZeRO over one replica);
// it refuses those it cannot estimate, wrapping ErrLayout or ErrJob.
func TestEstimateMemory(t *testing.T) {
	job := Job{Model: nn.GPTConfig{Vocab: 256, Context: 64, Layers: 4, Heads: 4, Dim: 64}, Seq: 64, GlobalBatch: 16, Ranks: 4}
	for _, l := range []Layout{
		{TP: 2, PP: 2, DP: 1, Micro: 4, Schedule: Schedule1F1B, Virtual: 1},
		{TP: 1, PP: 1, DP: 4, Zero: 3, Micro: 2, Schedule: Schedule1F1B, Virtual: 1},
		{TP: 1, PP: 4, DP: 1, Micro: 8, Schedule: ScheduleGPipe, Virtual: 1},
	} {
		want := EstimateLayout(job, Machine{Flops: 1}, l)
		got, err := EstimateMemory(job, l, Coeffs{})
		if err != nil || got.Memory != want.Memory || got.Activations != want.Activations || got.Optim != want.Optim || !got.Fits {
			t.Errorf("%v: %+v, %v; want the memory of %+v", l, got, err, want)
		}
	}
	wide := job
	wide.RanksPerHost = 2
	for _, l := range []Layout{
		{TP: 4, PP: 1, DP: 1, Micro: 1, Schedule: Schedule1F1B, Virtual: 1},          // TP across hosts
		{TP: 1, PP: 1, DP: 1, Zero: 1, Micro: 1, Schedule: Schedule1F1B, Virtual: 1}, // ZeRO over one replica
	} {
		if wide.Check(l) == nil {
			t.Fatalf("%v: Check accepts it", l)
		}
		if e, err := EstimateMemory(wide, l, Coeffs{}); err != nil || e.Memory <= 0 {
			t.Errorf("%v: %v, %v; want an estimate", l, e.Memory, err)
		}
	}
	for _, tc := range []struct {
		job  Job
		l    Layout
		want error
	}{
		{job, Layout{TP: 1, PP: 1, DP: 3, Micro: 1, Virtual: 1}, ErrLayout},          // 16 does not split over 3
		{job, Layout{TP: 1, PP: 3, DP: 1, Micro: 1, Virtual: 1}, ErrLayout},          // 4 layers over 3 stages
		{job, Layout{TP: 1, PP: 1, DP: 1, Micro: 0, Virtual: 1}, ErrLayout},          // no micro-batch
		{job, Layout{TP: 1, PP: 1, DP: 1, Zero: 4, Micro: 1, Virtual: 1}, ErrLayout}, // no such stage
		{Job{Model: job.Model, Seq: 64, Ranks: 1}, Layout{TP: 1, PP: 1, DP: 1, Micro: 1, Virtual: 1}, ErrJob},
	} {
		if _, err := EstimateMemory(tc.job, tc.l, Coeffs{}); !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want an error wrapping %v", tc.l, err, tc.want)
		}
	}
}
