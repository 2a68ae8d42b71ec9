package tp_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// seed is every test model's: the unsplit layer and each rank's part of
// it are built under it, so that the parts start as slices of the whole.
const seed = 11

// tol is the relative tolerance between a split layer's results and the
// unsplit layer's: the same sums, added in another order.
const tol = 1e-5

// runGroup runs f as every rank of an n-rank job, each with a group of
// the world's ranks (sequence parallel if sp), and returns what each
// rank returned. An Abort that f panics with fails the rank.
func runGroup[T any](t *testing.T, n int, sp bool, f func(g *tp.Group) (T, error)) []T {
	t.Helper()
	out := make([]T, n)
	spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) (err error) {
		defer nn.RecoverAbort(&err)
		g := tp.NewGroup(w.Comm, sp)
		g.Bind(ctx)
		out[w.Rank()], err = f(g)
		return err
	})
	return out
}

// randn returns n draws of N(0, 1) from the stream of that name.
func randn(name string, n int) []float32 {
	s := nn.NewStream(seed, name, 0)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(s.NormFloat64())
	}
	return v
}

// nan returns n NaNs: a whole that no rank has written yet.
func nan(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// piece cuts from whole, a matrix of cols columns, the rows [rows.Lo,
// rows.Hi) and the columns in cols (all of them if nil), row-major: what
// a rank holds of it.
func piece(whole []float32, cols int, rows tp.Range, cs []tp.Range) []float32 {
	if cs == nil {
		cs = []tp.Range{{Lo: 0, Hi: cols}}
	}
	var out []float32
	for r := rows.Lo; r < rows.Hi; r++ {
		for _, c := range cs {
			out = append(out, whole[r*cols+c.Lo:r*cols+c.Hi]...)
		}
	}
	return out
}

// place is piece's inverse: it returns a whole of rows·cols elements,
// NaN except where p, a rank's piece, puts its values.
func place(p []float32, allRows, cols int, rows tp.Range, cs []tp.Range) []float32 {
	whole := nan(allRows * cols)
	if cs == nil {
		cs = []tp.Range{{Lo: 0, Hi: cols}}
	}
	at := 0
	for r := rows.Lo; r < rows.Hi; r++ {
		for _, c := range cs {
			at += copy(whole[r*cols+c.Lo:r*cols+c.Hi], p[at:])
		}
	}
	return whole
}

// merge joins the ranks' wholes (NaN where a rank holds nothing): every
// element must come from some rank, and ranks that hold the same element
// (a replicated one) must hold exactly the same value, as replicas that
// drifted apart would train apart.
func merge(t *testing.T, what string, wholes [][]float32) []float32 {
	t.Helper()
	out := nan(len(wholes[0]))
	from := make([]int, len(out))
	bad := 0
	for r, w := range wholes {
		for i, v := range w {
			if math.IsNaN(float64(v)) {
				continue
			}
			if math.IsNaN(float64(out[i])) {
				out[i], from[i] = v, r
				continue
			}
			if out[i] != v && bad < 3 {
				bad++
				t.Errorf("%s: element %d: rank %d holds %v, rank %d %v; replicas must be equal", what, i, r, v, from[i], out[i])
			}
		}
	}
	for i, v := range out {
		if math.IsNaN(float64(v)) {
			t.Errorf("%s: element %d of %d is held by no rank", what, i, len(out))
			break
		}
	}
	return out
}

// near reports the first element where got and want differ by more than
// tol relative to want's largest magnitude (or to the element itself).
func near(got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d elements, want %d", len(got), len(want))
	}
	var scale float64
	for _, v := range want {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= tol*(scale+math.Abs(float64(want[i])))) {
			return fmt.Errorf("element %d is %v, want %v (difference %.3g, largest magnitude %.3g)", i, got[i], want[i], d, scale)
		}
	}
	return nil
}

// checkNear fails t with what if got and want are not near.
func checkNear(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if err := near(got, want); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// pasted returns, for each of the shards, the whole parameter (NaN
// outside the rank's part) filled from the rank's values that v picks
// (the weights or the gradient), by name.
func pasted(shards []tp.Shard, v func(p *nn.Param) []float32) map[string][]float32 {
	out := map[string][]float32{}
	for _, s := range shards {
		whole := nan(numel(s.Full))
		s.Paste(whole, v(s.Param))
		out[s.Param.Name] = whole
	}
	return out
}

func weights(p *nn.Param) []float32 { return p.W }
func grads(p *nn.Param) []float32   { return p.G }

// wholeIndex returns, for each element of s's parameter, the index of the
// element of the whole parameter it is.
func wholeIndex(s tp.Shard) []int {
	whole := nan(numel(s.Full))
	local := make([]float32, s.Param.Len())
	for i := range local {
		local[i] = float32(i)
	}
	s.Paste(whole, local)
	idx := make([]int, len(local))
	for j, v := range whole {
		if !math.IsNaN(float64(v)) {
			idx[int(v)] = j
		}
	}
	return idx
}

// perturbation is what shift adds to the whole parameter of that name.
func perturbation(name string, n int) []float32 {
	d := randn("perturb/"+name, n)
	for i := range d {
		d[i] *= 0.1
	}
	return d
}

// shift moves every parameter of an unsplit model away from its
// initial value (so that biases are not zero and gains not one) by the
// perturbation of its name.
func shift(ps []*nn.Param) {
	for _, p := range ps {
		for i, d := range perturbation(p.Name, p.Len()) {
			p.W[i] += d
		}
	}
}

// shiftShards is shift for a rank's parts: each element moves as the
// element of the whole parameter it is.
func shiftShards(shards []tp.Shard) {
	for _, s := range shards {
		d := perturbation(s.Param.Name, numel(s.Full))
		for i, j := range wholeIndex(s) {
			s.Param.W[i] += d[j]
		}
	}
}

// byName maps a store's parameters' values that v picks by name.
func byName(ps []*nn.Param, v func(p *nn.Param) []float32) map[string][]float32 {
	out := map[string][]float32{}
	for _, p := range ps {
		out[p.Name] = append([]float32(nil), v(p)...)
	}
	return out
}

// oneRank returns the world communicator of a job of one rank, for a
// reference model built of this package's layers.
func oneRank(t *testing.T) *spmd.Comm {
	t.Helper()
	ws, _ := spmdtest.Worlds(t, 1)
	t.Cleanup(func() { ws[0].Close() })
	return ws[0].Comm
}
