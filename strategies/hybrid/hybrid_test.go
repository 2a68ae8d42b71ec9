package hybrid_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// The test model: small enough for 8 ranks as goroutines, with a
// vocabulary that does not divide by 4 (the uneven cut), 4 layers (2
// stages of 2 virtual chunks of 1).
var testModel = nn.GPTConfig{Vocab: 30, Context: 8, Layers: 4, Heads: 4, Dim: 16}

const (
	testSeed  = 11
	testSteps = 10
	testBatch = 8 // sequences per step, over every replica
)

func adamw(params []*nn.Param, lo, hi int) (nn.Optimizer, error) {
	cfg := nn.DefaultAdamW()
	cfg.LR = 3e-3
	return nn.NewAdamW(cfg, params, lo, hi)
}

// batch returns step's global batch: random tokens and targets.
func batch(step, t int) *nn.Batch {
	r := rand.New(rand.NewPCG(testSeed, uint64(step)))
	b := &nn.Batch{N: testBatch, T: t, Tokens: make([]int32, testBatch*t), Y: make([]int32, testBatch*t)}
	for i := range b.Tokens {
		b.Tokens[i] = int32(r.IntN(testModel.Vocab))
		b.Y[i] = int32(r.IntN(testModel.Vocab))
	}
	return b
}

// replica returns replica d's rows of b, of dp replicas.
func replica(b *nn.Batch, d, dp int) *nn.Batch {
	n := b.N / dp
	lo, hi := d*n*b.T, (d+1)*n*b.T
	return &nn.Batch{N: n, T: b.T, Tokens: b.Tokens[lo:hi], Y: b.Y[lo:hi], First: d * n}
}

type run struct {
	losses []float32
	params []float32
}

var (
	refOnce sync.Once
	refRun  run
)

// reference trains nn.GPT on one rank: the single-process model.
func reference(t *testing.T) run {
	refOnce.Do(func() {
		g, err := nn.NewGPT(testModel, testSeed)
		if err != nil {
			t.Fatal(err)
		}
		st := g.Store()
		opt, err := adamw(st.Params, 0, len(st.W))
		if err != nil {
			t.Fatal(err)
		}
		for step := range testSteps {
			st.ZeroGrads()
			loss, err := g.Forward(batch(step, testModel.Context), true)
			if err != nil {
				t.Fatal(err)
			}
			g.Backward(1)
			opt.Step(st.W, st.G)
			refRun.losses = append(refRun.losses, loss)
		}
		refRun.params = append([]float32(nil), st.W...)
	})
	return refRun
}

// train runs the configuration's testSteps steps on n ranks and returns
// rank 0's view: trainFrom with no checkpoint.
func train(t *testing.T, n int, cfg hybrid.Config) run {
	t.Helper()
	return trainFrom(t, n, cfg, "", 0, testSteps, false)
}

// exactCodec compresses nothing: a plain sum all-reduce through the
// compression path (dp's hook without a pipeline, the pipeline's sync
// with one).
type exactCodec struct{}

func (exactCodec) Name() string { return "exact" }

func (exactCodec) AllReduce(ctx context.Context, c *spmd.Comm, _ int, buf []float32, _ []compress.Segment) (compress.Stats, error) {
	return compress.Stats{Raw: int64(4 * len(buf)), Sent: int64(4 * len(buf))}, prims.AllReduce(ctx, c, buf, prims.Sum[float32]())
}

// close reports whether got is want within rel, relative to want's
// largest magnitude.
func closeTo(t *testing.T, what string, got, want []float32, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	worst, at := 0.0, -1
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > worst {
			worst, at = d, i
		}
	}
	if worst > rel*scale {
		t.Errorf("%s: element %d is %v, want %v (off by %.3g, %.3g of the largest)", what, at, got[at], want[at], worst, worst/scale)
	}
}

// TestEqualsSingleProcess: the GPT trained on the mesh equals nn.GPT
// trained on one rank, step by step, for 10 steps of AdamW.
func TestEqualsSingleProcess(t *testing.T) {
	want := reference(t)
	cases := []struct {
		name              string
		tp, pp, dp, micro int
		zero              int
		schedule          string
		virtual           int
		seq, compress     bool
	}{
		{name: "1x1x1", tp: 1, pp: 1, dp: 1, micro: 1},
		{name: "4x1x1", tp: 4, pp: 1, dp: 1, micro: 2},
		{name: "2x1x2", tp: 2, pp: 1, dp: 2, micro: 2},
		{name: "2x1x2-zero3", tp: 2, pp: 1, dp: 2, micro: 2, zero: 3},
		{name: "1x2x2", tp: 1, pp: 2, dp: 2, micro: 2},
		{name: "1x2x2-zero1", tp: 1, pp: 2, dp: 2, micro: 2, zero: 1},
		{name: "1x2x1-gpipe", tp: 1, pp: 2, dp: 1, micro: 4, schedule: "gpipe"},
		{name: "1x2x1-interleaved", tp: 1, pp: 2, dp: 1, micro: 4, schedule: "interleaved", virtual: 2},
		{name: "1x4x1", tp: 1, pp: 4, dp: 1, micro: 4},
		{name: "2x2x2", tp: 2, pp: 2, dp: 2, micro: 2},
		{name: "2x2x2-seq", tp: 2, pp: 2, dp: 2, micro: 2, seq: true},
		{name: "2x1x1-seq", tp: 2, pp: 1, dp: 1, micro: 1, seq: true},
		{name: "2x1x2-compressed", tp: 2, pp: 1, dp: 2, micro: 2, compress: true},
		{name: "1x2x2-compressed", tp: 1, pp: 2, dp: 2, micro: 2, compress: true},
		{name: "2x1x2-zero3-compressed", tp: 2, pp: 1, dp: 2, micro: 2, zero: 3, compress: true},
		{name: "1x1x4-zero1-compressed", tp: 1, pp: 1, dp: 4, micro: 1, zero: 1, compress: true},
		{name: "1x2x2-zero1-compressed", tp: 1, pp: 2, dp: 2, micro: 2, zero: 1, compress: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := hybrid.Config{Model: testModel, TP: tc.tp, PP: tc.pp, DP: tc.dp, Zero: tc.zero, Micro: tc.micro,
				Schedule: tc.schedule, Virtual: tc.virtual, SeqParallel: tc.seq, Seed: testSeed, Optimizer: adamw}
			if tc.compress {
				cfg.Compress = exactCodec{}
			}
			got := train(t, tc.tp*tc.pp*tc.dp, cfg)
			if t.Failed() {
				return
			}
			closeTo(t, "losses", got.losses, want.losses, 1e-4)
			closeTo(t, "parameters after 10 steps", got.params, want.params, 1e-4)
		})
	}
}
