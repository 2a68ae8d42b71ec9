package hybrid_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// TestValidateMessages: a mesh that does not fit says so in the sizes it
// was given (no "dp 0" for a DP left to fill), in the right number.
func TestValidateMessages(t *testing.T) {
	model := nn.GPTConfig{Vocab: 16, Context: 8, Layers: 2, Heads: 2, Dim: 8}
	opt := func(params []*nn.Param, lo, hi int) (nn.Optimizer, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		edit func(*hybrid.Config)
		size int
		want string
	}{
		{"dp left", func(c *hybrid.Config) { c.TP = 2 }, 3, "hybrid: 3 ranks do not split into groups of tp 2 x pp 1 = 2"},
		{"dp given", func(c *hybrid.Config) { c.TP, c.DP = 2, 2 }, 3, "hybrid: tp 2 x pp 1 x dp 2 is 4 ranks, but the job has 3"},
		{"one layer", func(c *hybrid.Config) { c.Model.Layers, c.PP, c.DP = 1, 2, 1 }, 2, "hybrid: 1 layer does not cut into pp 2"},
		{"one head", func(c *hybrid.Config) { c.Model.Heads, c.TP, c.DP = 1, 2, 1 }, 2, "hybrid: 1 head does not divide over tp 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hybrid.Config{Model: model, TP: 1, PP: 1, Micro: 1, Optimizer: opt}
			tc.edit(&c)
			err := c.Validate(tc.size)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
}

// TestNewReturnsErrors: an error after the mesh is built (here the
// optimizer's) comes back from New on every layout, through zero, dp
// with a codec and the pipeline's sync alike, and what New built is
// closed, not a panic on a nil engine.
func TestNewReturnsErrors(t *testing.T) {
	refuse := func(params []*nn.Param, lo, hi int) (nn.Optimizer, error) {
		return nil, errors.New("this optimizer refuses")
	}
	for _, tc := range []struct {
		name     string
		pp, zero int
		codec    bool
	}{
		{"zero 0", 1, 0, false}, {"zero 3", 1, 3, false}, {"dp with a codec", 1, 0, true}, {"pipeline", 2, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
				cfg := hybrid.Config{Model: testModel, TP: 1, PP: tc.pp, Zero: tc.zero, Micro: 2, Seed: testSeed, Optimizer: refuse}
				if tc.codec {
					codec, err := compress.Parse("topk", testSeed)
					if err != nil {
						return err
					}
					cfg.Compress = codec
				}
				e, err := hybrid.New(ctx, w.Comm, cfg)
				if e != nil || err == nil || !strings.Contains(err.Error(), "this optimizer refuses") {
					t.Errorf("rank %d: New returned %v, %v; want nil and the optimizer's error", w.Rank(), e, err)
				}
				return nil
			})
		})
	}
}
