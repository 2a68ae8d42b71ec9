package tp_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// someIDs are token ids with repeats and ids of every rank's rows; a
// micro-batch takes the first n·t.
var someIDs = []int32{9, 0, 3, 3, 6, 1, 9, 4}

// TestEmbedding checks the vocabulary-parallel table against nn's, with
// a vocabulary that does not cut evenly over 3 or 4 ranks, with and
// without sequence parallelism.
func TestEmbedding(t *testing.T) {
	const vocab, dim = 10, 8
	type tcase struct {
		size int
		sp   bool
	}
	var cases []tcase
	for _, size := range []int{1, 2, 3, 4} {
		cases = append(cases, tcase{size, false}, tcase{size, true})
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("tp %d/sp=%v", tc.size, tc.sp), func(t *testing.T) {
			n, tt := tokens(tc.size)
			ids := someIDs[:n*tt]
			all := n * tt

			var want layerResult
			{
				b := nn.NewBuilder()
				e := nn.NewEmbedding(b.Scope("wte"), vocab, dim, nn.Normal(1))
				st := b.Build(seed)
				want.w0 = byName(st.Params, weights)
				shift(st.Params)
				y, err := e.Forward(ids, n, tt)
				if err != nil {
					t.Fatal(err)
				}
				want.y = slices.Clone(y.Data)
				e.Backward(nn.FromData(randn("dy", all*dim), n, tt, dim))
				want.g = byName(st.Params, grads)
			}

			got := runGroup(t, tc.size, tc.sp, func(g *tp.Group) (layerResult, error) {
				if err := g.SetTokens(n, tt); err != nil {
					return layerResult{}, err
				}
				b := nn.NewBuilder()
				e := tp.NewEmbedding(b.Scope("wte"), g, vocab, dim, nn.Normal(1))
				b.Build(seed)
				if lo, hi := prims.Block(vocab, g.Size, g.Rank); e.Lo != lo || e.Hi != hi {
					return layerResult{}, fmt.Errorf("rows [%d, %d) of the table, want prims.Block's [%d, %d)", e.Lo, e.Hi, lo, hi)
				}
				res := layerResult{w0: pasted(e.Shards(), weights)}
				shiftShards(e.Shards())
				rows := tp.Range{Lo: 0, Hi: all}
				if tc.sp {
					first, k := g.RowBlock()
					rows = tp.Range{Lo: first, Hi: first + k}
				}
				y, err := e.Forward(ids, n, tt)
				if err != nil {
					return res, err
				}
				res.y = place(y.Data, all, dim, rows, nil)
				dy := piece(randn("dy", all*dim), dim, rows, nil)
				if tc.sp {
					e.Backward(nn.FromData(dy, rows.Len(), dim))
				} else {
					e.Backward(nn.FromData(dy, n, tt, dim))
				}
				res.g = pasted(e.Shards(), grads)
				return res, nil
			})
			if !t.Failed() {
				compare(t, want, got)
			}
		})
	}
}

// TestEmbeddingIndex checks that an id outside the vocabulary fails
// Forward on every rank with nn.ErrIndex, and that the ranks go on.
func TestEmbeddingIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   int32
	}{{"negative", -1}, {"vocab", 10}, {"far", 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			runGroup(t, 3, false, func(g *tp.Group) (struct{}, error) {
				g.SetTokens(1, 3)
				b := nn.NewBuilder()
				e := tp.NewEmbedding(b.Scope("wte"), g, 10, 4, nn.Normal(1))
				b.Build(seed)
				if _, err := e.Forward([]int32{1, tc.id, 2}, 1, 3); !errors.Is(err, nn.ErrIndex) {
					return struct{}{}, fmt.Errorf("Forward with id %d: %v, want an error wrapping nn.ErrIndex", tc.id, err)
				}
				// The failure made no collective: the next pass runs.
				if _, err := e.Forward([]int32{1, 5, 9}, 1, 3); err != nil {
					return struct{}{}, err
				}
				return struct{}{}, nil
			})
		})
	}
}
