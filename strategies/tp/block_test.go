package tp_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// TestMicroBatches runs two micro-batches through two copies of a block
// that share its parameters (nn.Reuse, as a pipeline stage keeps one per
// micro-batch in flight), both forwards before both backwards: the
// outputs are nn.Block's, and the gradients accumulate to the sum of the
// two, with sequence parallelism too, whose partial gradients are summed
// over the group once per pass and never again.
func TestMicroBatches(t *testing.T) {
	for _, size := range []int{1, 2, 3} {
		for _, sp := range []bool{false, true} {
			t.Run(fmt.Sprintf("tp %d/sp=%v", size, sp), func(t *testing.T) {
				n, tt := tokens(size)
				cfg := blockConfig(size, 0)
				all, c := n*tt, cfg.Dim
				xs := [][]float32{randn("x0", all*c), randn("x1", all*c)}
				dys := [][]float32{randn("dy0", all*c), randn("dy1", all*c)}

				var want layerResult
				{
					b := nn.NewBuilder()
					k := nn.NewBlock(b.Scope("h.0"), cfg, nil)
					st := b.Build(seed)
					want.w0 = byName(st.Params, weights)
					shift(st.Params)
					for i := range xs {
						want.y = append(want.y, k.Forward(nn.FromData(slices.Clone(xs[i]), n, tt, c), true).Data...)
						want.dx = append(want.dx, k.Backward(nn.FromData(slices.Clone(dys[i]), n, tt, c)).Data...)
					}
					want.g = byName(st.Params, grads)
				}

				got := runGroup(t, size, sp, func(g *tp.Group) (layerResult, error) {
					if err := g.SetTokens(n, tt); err != nil {
						return layerResult{}, err
					}
					b := nn.NewBuilder()
					k0, err := tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
					if err != nil {
						return layerResult{}, err
					}
					st := b.Build(seed)
					res := layerResult{w0: pasted(k0.Shards(), weights)}
					shiftShards(k0.Shards())
					k1, err := tp.NewBlock(nn.Reuse(st).Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
					if err != nil {
						return res, err
					}
					if !slices.Equal(k0.Params(), k1.Params()) {
						return res, fmt.Errorf("the copy built with nn.Reuse has parameters of its own")
					}
					rows := tp.Range{Lo: 0, Hi: all}
					if sp {
						first, k := g.RowBlock()
						rows = tp.Range{Lo: first, Hi: first + k}
					}
					local := func(v []float32) *nn.Tensor {
						p := piece(v, c, rows, nil)
						if sp {
							return nn.FromData(p, rows.Len(), c)
						}
						return nn.FromData(p, n, tt, c)
					}
					blocks := []*tp.Block{k0, k1}
					var ys, dxs [][]float32
					for i, k := range blocks {
						ys = append(ys, place(k.Forward(local(xs[i]), true).Data, all, c, rows, nil))
					}
					for i, k := range blocks {
						dxs = append(dxs, place(k.Backward(local(dys[i])).Data, all, c, rows, nil))
					}
					res.y = slices.Concat(ys...)
					res.dx = slices.Concat(dxs...)
					res.g = pasted(k0.Shards(), grads)
					return res, nil
				})
				if !t.Failed() {
					compare(t, want, got)
				}
			})
		}
	}
}

// TestBlockHeads checks that a block refuses heads that do not divide
// over the group, with an error rather than a panic.
func TestBlockHeads(t *testing.T) {
	for _, tc := range []struct {
		size, heads int
		ok          bool
	}{{2, 6, true}, {3, 6, true}, {4, 6, false}, {3, 4, false}} {
		t.Run(fmt.Sprintf("%d heads/tp %d", tc.heads, tc.size), func(t *testing.T) {
			runGroup(t, tc.size, false, func(g *tp.Group) (struct{}, error) {
				cfg := nn.GPTConfig{Vocab: 10, Context: 4, Layers: 1, Heads: tc.heads, Dim: 2 * tc.heads}
				_, err := tp.NewBlock(nn.NewBuilder(), g, cfg, tp.NewRNG(seed), "h.0")
				if (err == nil) != tc.ok {
					return struct{}{}, fmt.Errorf("NewBlock: %v, want success %v", err, tc.ok)
				}
				return struct{}{}, nil
			})
		})
	}
}
