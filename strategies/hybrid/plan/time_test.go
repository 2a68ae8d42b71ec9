package plan

import (
	"math"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

// TestBubbleShare checks that with free communication and no optimizer
// step the bubble is (p-1)/(m+p-1) of the step, and (p-1)/v/(m+(p-1)/v)
// interleaved.
func TestBubbleShare(t *testing.T) {
	job := Job{
		Model: nn.GPTConfig{Vocab: 300, Context: 64, Layers: 8, Heads: 4, Dim: 64},
		Seq:   64, GlobalBatch: 32, Ranks: 8, RanksPerHost: 4,
	}
	mc := Machine{Flops: 1e10}
	tests := []struct {
		name string
		l    Layout
		want float64
	}{
		{"pp2 m4 1f1b", Layout{TP: 1, PP: 2, DP: 4, Micro: 4, Schedule: Schedule1F1B, Virtual: 1}, 1.0 / 5},
		{"pp4 m8 gpipe", Layout{TP: 2, PP: 4, DP: 1, Micro: 8, Schedule: ScheduleGPipe, Virtual: 1}, 3.0 / 11},
		{"pp8 m1 1f1b", Layout{TP: 1, PP: 8, DP: 1, Micro: 1, Schedule: Schedule1F1B, Virtual: 1}, 7.0 / 8},
		{"pp2 m4 v2", Layout{TP: 1, PP: 2, DP: 4, Micro: 4, Schedule: ScheduleInterleaved, Virtual: 2}, 0.5 / 4.5},
		{"pp4 m8 v2 sp", Layout{TP: 2, PP: 4, DP: 1, Micro: 8, Schedule: ScheduleInterleaved, Virtual: 2, SeqParallel: true}, 1.5 / 9.5},
		{"pp2 m2 v4", Layout{TP: 1, PP: 2, DP: 4, Micro: 2, Schedule: ScheduleInterleaved, Virtual: 4}, 0.25 / 2.25},
		{"pp1", Layout{TP: 4, PP: 1, DP: 2, Micro: 4, Schedule: Schedule1F1B, Virtual: 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := job.Check(tt.l); err != nil {
				t.Fatal(err)
			}
			e := EstimateLayout(job, mc, tt.l)
			if got := e.Bubble / e.Step; !near(got, tt.want) && !(got == 0 && tt.want == 0) {
				t.Errorf("bubble %.6f of step, want %.6f", got, tt.want)
			}
			if e.TPComm != 0 || e.PPComm != 0 || e.DPComm != 0 || e.Optimizer != 0 {
				t.Errorf("free links and no bandwidth still cost: %+v", e)
			}
		})
	}
}

// TestCommFormulas checks the collective counts one part at a time, each
// with one constant of the machine non-zero.
func TestCommFormulas(t *testing.T) {
	model := nn.GPTConfig{Vocab: 256, Context: 64, Layers: 4, Heads: 4, Dim: 64}
	job := Job{Model: model, Seq: 64, GlobalBatch: 16, Ranks: 8, RanksPerHost: 8}
	const b, T, C, L = 2, 64, 64, 4
	act := float64(b * T * C * 4)
	inf := 1e300 // FLOP/s: compute is free
	tests := []struct {
		name string
		mc   Machine
		l    Layout
		part func(Estimate) float64
		want float64
	}{
		{"tp α: 4 a block + embeddings + head + 3 cross-entropy, ×2(t-1), ×m",
			Machine{Flops: inf, AlphaNear: 1}, Layout{TP: 4, PP: 1, DP: 2, Micro: 4, Schedule: Schedule1F1B, Virtual: 1},
			func(e Estimate) float64 { return e.TPComm }, 4 * (4*L + 5) * 2 * 3},
		{"tp β with sp: 4 all-gathers and 4 reduce-scatters a block",
			Machine{Flops: inf, BetaNear: 1}, Layout{TP: 2, PP: 1, DP: 4, Micro: 1, Schedule: Schedule1F1B, Virtual: 1, SeqParallel: true},
			func(e Estimate) float64 { return e.TPComm }, (4*L+2)*(2*act)*2*0.5 + 3*(2*b*T*4)*2*0.5}, // b = 4
		{"pp β: a middle stage sends two activations a micro-batch",
			Machine{Flops: inf, BetaNear: 1}, Layout{TP: 1, PP: 4, DP: 2, Micro: 4, Schedule: Schedule1F1B, Virtual: 1},
			func(e Estimate) float64 { return e.PPComm + e.Bubble }, (4 + 3) * 2 * act},
		{"pp β interleaved v2 sp: 3 messages a micro-batch (2 + 2 less the ends), /TP",
			Machine{Flops: inf, BetaNear: 1}, Layout{TP: 2, PP: 2, DP: 2, Micro: 4, Schedule: ScheduleInterleaved, Virtual: 2, SeqParallel: true},
			func(e Estimate) float64 { return e.PPComm }, 4 * 3 * act / 2},
		{"dp β zero0: one all-reduce of the gradients",
			Machine{Flops: inf, BetaNear: 1}, Layout{TP: 1, PP: 1, DP: 8, Micro: 2, Schedule: Schedule1F1B, Virtual: 1},
			func(e Estimate) float64 { return e.DPComm }, 2 * 7.0 / 8 * 4 * float64(model.NumParams())},
		{"dp α zero2: m reduce-scatters and an all-gather",
			Machine{Flops: inf, AlphaNear: 1}, Layout{TP: 2, PP: 1, DP: 4, Zero: 2, Micro: 4, Schedule: Schedule1F1B, Virtual: 1},
			func(e Estimate) float64 { return e.DPComm }, 5 * 3},
		{"dp α zero3: m × (reduce-scatter + 2 all-gathers)",
			Machine{Flops: inf, AlphaNear: 1}, Layout{TP: 2, PP: 1, DP: 4, Zero: 3, Micro: 4, Schedule: Schedule1F1B, Virtual: 1},
			func(e Estimate) float64 { return e.DPComm }, 4 * 3 * 3},
		{"optimizer: 28 bytes a parameter",
			Machine{Flops: inf, MemBandwidth: 1}, Layout{TP: 1, PP: 1, DP: 8, Micro: 2, Schedule: Schedule1F1B, Virtual: 1},
			func(e Estimate) float64 { return e.Optimizer }, 28 * float64(model.NumParams())},
		{"compute: 3·(24C² + 4TC) a token a block and the head",
			Machine{Flops: 1}, Layout{TP: 1, PP: 1, DP: 8, Micro: 2, Schedule: Schedule1F1B, Virtual: 1},
			func(e Estimate) float64 { return e.Compute }, 2 * 1 * T * 3 * (L*(24*C*C+4*T*C) + 2*C*256)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := job.Check(tt.l); err != nil {
				t.Fatal(err)
			}
			e := EstimateLayout(job, tt.mc, tt.l)
			if got := tt.part(e); !near(got, tt.want) {
				t.Errorf("%v: %g, want %g", tt.l, got, tt.want)
			}
		})
	}
}

// TestFarLinks checks which groups cross hosts of 4 ranks among 8.
func TestFarLinks(t *testing.T) {
	job := Job{
		Model: nn.GPTConfig{Vocab: 256, Context: 64, Layers: 4, Heads: 4, Dim: 64},
		Seq:   64, GlobalBatch: 16, Ranks: 8, RanksPerHost: 4,
	}
	tests := []struct {
		l          Layout
		tp, pp, dp bool
	}{
		{Layout{TP: 1, PP: 1, DP: 8}, false, false, true},
		{Layout{TP: 4, PP: 1, DP: 2}, false, false, true},
		{Layout{TP: 2, PP: 2, DP: 2}, false, true, false},
		{Layout{TP: 1, PP: 8, DP: 1}, false, true, false},
		{Layout{TP: 1, PP: 2, DP: 4}, false, true, false},
	}
	for _, tt := range tests {
		var tp, pp, dp bool
		for s := range tt.l.PP {
			tp = tp || job.tpCrosses(tt.l, s)
			dp = dp || (tt.l.DP > 1 && job.dpCrosses(tt.l, s))
			pp = pp || (s+1 < tt.l.PP && job.ppCrosses(tt.l, s, s+1))
		}
		if tp != tt.tp || pp != tt.pp || dp != tt.dp {
			t.Errorf("%v: crosses tp %v pp %v dp %v, want %v %v %v", tt.l, tp, pp, dp, tt.tp, tt.pp, tt.dp)
		}
	}
}
