package tp_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// splitLayer is a layer of this package: a Layer that says which part of
// the unsplit layer's parameters it holds.
type splitLayer interface {
	nn.Layer
	Shards() []tp.Shard
}

// layerCase is a split layer against its unsplit one: the same input
// [n, t, in] on every rank (or the rank's part of it), the same gradient
// of the output [n, t, out].
type layerCase struct {
	name          string
	size          int
	sp            bool
	n, t, in, out int
	ref           func(b *nn.Builder) nn.Layer
	split         func(b *nn.Builder, g *tp.Group) (splitLayer, error)
	// xCols and yCols are the columns of the whole input and output that
	// a rank's input and output hold; nil for all of them.
	xCols, yCols func(l splitLayer) []tp.Range
	// rowsIn and rowsOut say whether, with sequence parallelism, the
	// input and the output hold only the rank's block of token rows.
	rowsIn, rowsOut bool
	// partial lists, with sequence parallelism, the parameters whose
	// gradients are each rank's part of the sum, which the test sums
	// (tp.SumPartial) as the model driving the layer would.
	partial func(l splitLayer) []*nn.Param
}

// layerResult is what the unsplit layer, or a rank of the split one,
// computed: the initial weights and the gradients by name, the output
// and the input's gradient. A rank's are wholes, NaN outside its part.
type layerResult struct {
	w0, g map[string][]float32
	y, dx []float32
}

// reference runs the unsplit layer.
func (c layerCase) reference() layerResult {
	b := nn.NewBuilder()
	l := c.ref(b)
	st := b.Build(seed)
	res := layerResult{w0: byName(st.Params, weights)}
	shift(st.Params)
	x := nn.FromData(randn("x", c.n*c.t*c.in), c.n, c.t, c.in)
	res.y = slices.Clone(l.Forward(x, true).Data)
	dy := nn.FromData(randn("dy", c.n*c.t*c.out), c.n, c.t, c.out)
	res.dx = slices.Clone(l.Backward(dy).Data)
	res.g = byName(st.Params, grads)
	return res
}

// rank runs the rank's part of the split layer.
func (c layerCase) rank(g *tp.Group) (layerResult, error) {
	if err := g.SetTokens(c.n, c.t); err != nil {
		return layerResult{}, err
	}
	b := nn.NewBuilder()
	l, err := c.split(b, g)
	if err != nil {
		return layerResult{}, err
	}
	b.Build(seed)
	shards := l.Shards()
	for i, p := range l.Params() {
		if i >= len(shards) || shards[i].Param != p {
			return layerResult{}, fmt.Errorf("parameter %d, %s, has no shard in Shards' order", i, p.Name)
		}
	}
	if len(shards) != len(l.Params()) {
		return layerResult{}, fmt.Errorf("%d shards for %d parameters", len(shards), len(l.Params()))
	}
	res := layerResult{w0: pasted(shards, weights)}
	shiftShards(shards)

	all := c.n * c.t
	inRows, outRows := tp.Range{Lo: 0, Hi: all}, tp.Range{Lo: 0, Hi: all}
	first, rows := g.RowBlock()
	if c.sp && c.rowsIn {
		inRows = tp.Range{Lo: first, Hi: first + rows}
	}
	if c.sp && c.rowsOut {
		outRows = tp.Range{Lo: first, Hi: first + rows}
	}
	var xc, yc []tp.Range
	if c.xCols != nil {
		xc = c.xCols(l)
	}
	if c.yCols != nil {
		yc = c.yCols(l)
	}
	shape := func(rows tp.Range, split bool, data []float32) *nn.Tensor {
		if c.sp && split {
			return nn.FromData(data, rows.Len(), len(data)/rows.Len())
		}
		return nn.FromData(data, c.n, c.t, len(data)/all)
	}
	x := shape(inRows, c.rowsIn, piece(randn("x", all*c.in), c.in, inRows, xc))
	y := l.Forward(x, true)
	if want := len(piece(make([]float32, all*c.out), c.out, outRows, yc)); y.Len() != want {
		return res, fmt.Errorf("output of shape %v, want %d elements", y.Shape, want)
	}
	res.y = place(y.Data, all, c.out, outRows, yc)

	dy := shape(outRows, c.rowsOut, piece(randn("dy", all*c.out), c.out, outRows, yc))
	var ps []*nn.Param
	if c.sp && c.partial != nil {
		ps = c.partial(l)
	}
	var saved []float32
	sum := tp.SumPartial(g, ps, &saved)
	dx := l.Backward(dy)
	sum()
	if !slices.Equal(dx.Shape, x.Shape) {
		return res, fmt.Errorf("input gradient of shape %v for input %v", dx.Shape, x.Shape)
	}
	res.dx = place(dx.Data, all, c.in, inRows, xc)
	res.g = pasted(shards, grads)
	return res, nil
}

// check runs the case on c.size ranks and compares them with the
// unsplit layer.
func (c layerCase) check(t *testing.T) {
	want := c.reference()
	got := runGroup(t, c.size, c.sp, c.rank)
	if !t.Failed() {
		compare(t, want, got)
	}
}

// compare checks the ranks' results, merged, against the unsplit
// layer's: initial weights exactly, the rest within tol.
func compare(t *testing.T, want layerResult, got []layerResult) {
	t.Helper()
	field := func(f func(r layerResult) []float32) [][]float32 {
		out := make([][]float32, len(got))
		for i, r := range got {
			out[i] = f(r)
		}
		return out
	}
	if want.y != nil {
		checkNear(t, "output", merge(t, "output", field(func(r layerResult) []float32 { return r.y })), want.y)
	}
	if want.dx != nil {
		checkNear(t, "input gradient", merge(t, "input gradient", field(func(r layerResult) []float32 { return r.dx })), want.dx)
	}
	names := slices.Sorted(maps.Keys(want.g))
	if gotNames := slices.Sorted(maps.Keys(got[0].g)); !slices.Equal(gotNames, names) {
		t.Fatalf("parameters %v, want the unsplit layer's %v", gotNames, names)
	}
	for _, name := range names {
		w0 := merge(t, name+" initial", field(func(r layerResult) []float32 { return r.w0[name] }))
		if !slices.Equal(w0, want.w0[name]) {
			t.Errorf("%s: the ranks' initial parts pasted are not the unsplit layer's initial weights", name)
		}
		checkNear(t, name+" gradient", merge(t, name+" gradient", field(func(r layerResult) []float32 { return r.g[name] })), want.g[name])
	}
}

// seq is unsplit layers in turn.
type seq []nn.Layer

func (s seq) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	for _, l := range s {
		x = l.Forward(x, train)
	}
	return x
}

func (s seq) Backward(dy *nn.Tensor) *nn.Tensor {
	for i := len(s) - 1; i >= 0; i-- {
		dy = s[i].Backward(dy)
	}
	return dy
}

func (s seq) Params() []*nn.Param {
	var ps []*nn.Param
	for _, l := range s {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// chain is split layers in turn.
type chain []splitLayer

func (c chain) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	for _, l := range c {
		x = l.Forward(x, train)
	}
	return x
}

func (c chain) Backward(dy *nn.Tensor) *nn.Tensor {
	for i := len(c) - 1; i >= 0; i-- {
		dy = c[i].Backward(dy)
	}
	return dy
}

func (c chain) Params() []*nn.Param {
	var ps []*nn.Param
	for _, l := range c {
		ps = append(ps, l.Params()...)
	}
	return ps
}

func (c chain) Shards() []tp.Shard {
	var s []tp.Shard
	for _, l := range c {
		s = append(s, l.Shards()...)
	}
	return s
}

var (
	init1    = nn.Normal(0.5)
	initProj = nn.Normal(0.3)
)

// tokens is the micro-batch's shape for a group of size ranks: 2
// sequences of 4 tokens, or of 3 over 3 ranks, so that the 2·t token
// rows cut into equal blocks.
func tokens(size int) (n, t int) {
	if size == 3 {
		return 2, 3
	}
	return 2, 4
}

// blocks is one Range per pair of lo and hi.
func blocks(bounds ...int) []tp.Range {
	var r []tp.Range
	for i := 0; i+1 < len(bounds); i += 2 {
		r = append(r, tp.Range{Lo: bounds[i], Hi: bounds[i+1]})
	}
	return r
}

func columnCase(size, in, out int, gather, twoBlocks, sp bool) layerCase {
	n, t := tokens(size)
	c := layerCase{
		name: fmt.Sprintf("column %dx%d gather=%v two blocks=%v/tp %d", in, out, gather, twoBlocks, size),
		size: size, sp: sp, n: n, t: t, in: in, out: out, rowsIn: true,
		ref: func(b *nn.Builder) nn.Layer { return nn.NewLinearInit(b.Scope("fc"), in, out, true, init1) },
		split: func(b *nn.Builder, g *tp.Group) (splitLayer, error) {
			lo, hi := g.Part(out)
			cols := blocks(lo, hi)
			if twoBlocks { // the rank's block of each half, as c_attn's q, k, v
				lo, hi = g.Part(out / 2)
				cols = blocks(lo, hi, out/2+lo, out/2+hi)
			}
			l := tp.NewColumnLinear(b.Scope("fc"), g, in, out, true, init1, cols)
			l.Gather = gather
			return l, nil
		},
	}
	if !gather {
		c.yCols = func(l splitLayer) []tp.Range { return l.(*tp.ColumnLinear).Cols }
	}
	return c
}

func rowCase(size, in, out int, sp bool) layerCase {
	n, t := tokens(size)
	return layerCase{
		name: fmt.Sprintf("row %dx%d from a split input/tp %d", in, out, size),
		size: size, sp: sp, n: n, t: t, in: in, out: out, rowsOut: true,
		ref: func(b *nn.Builder) nn.Layer { return nn.NewLinearInit(b.Scope("proj"), in, out, true, initProj) },
		split: func(b *nn.Builder, g *tp.Group) (splitLayer, error) {
			lo, hi := g.Part(in)
			return tp.NewRowLinear(b.Scope("proj"), g, in, out, true, initProj, blocks(lo, hi)), nil
		},
		xCols:   func(l splitLayer) []tp.Range { return l.(*tp.RowLinear).Rows },
		partial: func(l splitLayer) []*nn.Param { return []*nn.Param{l.(*tp.RowLinear).B} },
	}
}

func columnRowCase(size, in, hidden, out int, sp bool) layerCase {
	n, t := tokens(size)
	return layerCase{
		name: fmt.Sprintf("row %dx%d fed by column %dx%d/tp %d", hidden, out, in, hidden, size),
		size: size, sp: sp, n: n, t: t, in: in, out: out, rowsIn: true, rowsOut: true,
		ref: func(b *nn.Builder) nn.Layer {
			return seq{nn.NewLinearInit(b.Scope("fc"), in, hidden, true, init1), nn.NewLinearInit(b.Scope("proj"), hidden, out, true, initProj)}
		},
		split: func(b *nn.Builder, g *tp.Group) (splitLayer, error) {
			lo, hi := g.Part(hidden)
			return chain{
				tp.NewColumnLinear(b.Scope("fc"), g, in, hidden, true, init1, blocks(lo, hi)),
				tp.NewRowLinear(b.Scope("proj"), g, hidden, out, true, initProj, blocks(lo, hi)),
			}, nil
		},
		partial: func(l splitLayer) []*nn.Param { return []*nn.Param{l.(chain)[1].(*tp.RowLinear).B} },
	}
}

func mlpCase(size, dim int, sp bool) layerCase {
	n, t := tokens(size)
	return layerCase{
		name: fmt.Sprintf("mlp %d/tp %d", dim, size),
		size: size, sp: sp, n: n, t: t, in: dim, out: dim, rowsIn: true, rowsOut: true,
		ref: func(b *nn.Builder) nn.Layer {
			m := b.Scope("mlp")
			return seq{nn.NewLinearInit(m.Scope("c_fc"), dim, 4*dim, true, init1), &nn.GeLU{}, nn.NewLinearInit(m.Scope("c_proj"), 4*dim, dim, true, initProj)}
		},
		split: func(b *nn.Builder, g *tp.Group) (splitLayer, error) {
			return tp.NewMLP(b.Scope("mlp"), g, dim, 4*dim, init1, initProj), nil
		},
		partial: func(l splitLayer) []*nn.Param { return []*nn.Param{l.(*tp.MLP).Proj.B} },
	}
}

// heads returns the heads and width of the attention tested over size
// ranks: 6 heads of 2 over 1, 2 and 3 ranks, 4 heads of 4 over 4.
func heads(size int) (h, dim int) {
	if size == 4 {
		return 4, 16
	}
	return 6, 12
}

func attentionCase(size int, sp bool) layerCase {
	n, t := tokens(size)
	h, dim := heads(size)
	return layerCase{
		name: fmt.Sprintf("attention %d heads of %d/tp %d", h, dim/h, size),
		size: size, sp: sp, n: n, t: t, in: dim, out: dim, rowsIn: true, rowsOut: true,
		ref: func(b *nn.Builder) nn.Layer { return nn.NewAttention(b.Scope("attn"), dim, h, init1, initProj) },
		split: func(b *nn.Builder, g *tp.Group) (splitLayer, error) {
			return tp.NewAttention(b.Scope("attn"), g, dim, h, init1, initProj), nil
		},
		partial: func(l splitLayer) []*nn.Param { return []*nn.Param{l.(*tp.Attention).Proj.B} },
	}
}

func blockConfig(size int, dropout float32) nn.GPTConfig {
	h, dim := heads(size)
	_, t := tokens(size)
	return nn.GPTConfig{Vocab: 10, Context: t, Layers: 2, Heads: h, Dim: dim, Dropout: dropout}
}

func blockCase(size int, sp bool) layerCase {
	n, t := tokens(size)
	cfg := blockConfig(size, 0)
	return layerCase{
		name: fmt.Sprintf("block %d heads of %d/tp %d", cfg.Heads, cfg.Dim/cfg.Heads, size),
		size: size, sp: sp, n: n, t: t, in: cfg.Dim, out: cfg.Dim, rowsIn: true, rowsOut: true,
		ref: func(b *nn.Builder) nn.Layer { return nn.NewBlock(b.Scope("h.0"), cfg, nil) },
		split: func(b *nn.Builder, g *tp.Group) (splitLayer, error) {
			return tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
		},
	}
}

// TestLayers checks that each split layer computes what its unsplit
// layer does, forward and backward, over 1 to 4 ranks.
func TestLayers(t *testing.T) {
	var cases []layerCase
	for _, size := range []int{1, 2, 3, 4} {
		cases = append(cases,
			columnCase(size, 8, 12, false, false, false),
			columnCase(size, 8, 12, true, false, false),
			columnRowCase(size, 8, 12, 8, false),
			rowCase(size, 12, 8, false),
			mlpCase(size, 8, false),
			attentionCase(size, false),
			blockCase(size, false),
		)
	}
	for _, size := range []int{3, 4} { // uneven parts
		cases = append(cases,
			columnCase(size, 8, 10, false, false, false),
			columnRowCase(size, 6, 10, 6, false),
			rowCase(size, 10, 6, false),
		)
	}
	for _, size := range []int{2, 3} {
		cases = append(cases, columnCase(size, 6, 12, false, true, false))
	}
	// Fewer columns or rows than ranks: the last ranks hold none (an empty
	// product, a zero partial sum) and the group still computes the whole
	// layer, forward and backward.
	for _, size := range []int{2, 3} {
		cases = append(cases,
			columnCase(size, 8, 1, false, false, false),
			columnRowCase(size, 6, 1, 6, false),
			rowCase(size, 1, 6, false),
		)
	}
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}

// TestSequenceParallel checks that with sequence parallelism each rank
// computes its block of the token rows of what the layer computes
// without it, and the same gradients once the partial ones are summed.
func TestSequenceParallel(t *testing.T) {
	var cases []layerCase
	for _, size := range []int{1, 2, 3, 4} {
		cases = append(cases,
			columnCase(size, 8, 12, false, false, true),
			columnCase(size, 8, 12, true, false, true),
			columnRowCase(size, 8, 12, 8, true),
			rowCase(size, 12, 8, true),
			mlpCase(size, 8, true),
			attentionCase(size, true),
			blockCase(size, true),
		)
	}
	for _, c := range cases {
		t.Run(c.name, c.check)
	}
}

// TestSetTokens checks that sequence parallelism refuses token rows that
// do not cut into equal blocks, and that without it any shape goes.
func TestSetTokens(t *testing.T) {
	cases := []struct {
		name    string
		size    int
		sp      bool
		n, t    int
		wantErr bool
	}{
		{"sp 2x3 over 2", 2, true, 2, 3, false},
		{"sp 1x3 over 2", 2, true, 1, 3, true},
		{"sp 2x5 over 4", 4, true, 2, 5, true},
		{"sp 3x4 over 4", 4, true, 3, 4, false},
		{"no sp 1x3 over 2", 2, false, 1, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := runGroup(t, tc.size, tc.sp, func(g *tp.Group) (error, error) {
				err := g.SetTokens(tc.n, tc.t)
				if err == nil {
					if n, tt := g.Tokens(); n != tc.n || tt != tc.t {
						return nil, fmt.Errorf("Tokens() = %d, %d after SetTokens(%d, %d)", n, tt, tc.n, tc.t)
					}
					first, rows := g.RowBlock()
					wantFirst, wantRows := 0, tc.n*tc.t
					if tc.sp {
						wantRows /= tc.size
						wantFirst = g.Rank * wantRows
					}
					if first != wantFirst || rows != wantRows {
						return nil, fmt.Errorf("RowBlock() = %d, %d, want %d, %d", first, rows, wantFirst, wantRows)
					}
				}
				return err, nil
			})
			for r, err := range errs {
				if (err != nil) != tc.wantErr {
					t.Errorf("rank %d: SetTokens(%d, %d) = %v, want an error: %v", r, tc.n, tc.t, err, tc.wantErr)
				}
			}
		})
	}
}
