package hybrid_test

import (
	"strings"
	"testing"

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
