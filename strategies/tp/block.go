package tp

import (
	"fmt"
	"math"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Block is Megatron's parallel transformer layer on GPT-2's pre-LN block:
//
//	x = x + Drop1(Attn(LN1(x)))
//	x = x + Drop2(MLP(LN2(x)))
//
// with the attention's heads and the MLP's hidden units split over the
// group: two all-reduces forward (one per sub-layer's g) and two backward
// (one per f). The LayerNorms, the residual stream and its dropouts are
// replicated: every rank computes them alike on the whole activation.
// With sequence parallelism they are split instead: each rank holds its
// block of the token rows there, the all-reduces become an all-gather
// entering each sub-layer and a reduce-scatter leaving it, and the
// LayerNorms' and the row-parallel biases' gradients, each rank's part of
// the sum, are all-reduced over the group at the end of Backward.
// Parameter names and initial values are nn.NewBlock's.
type Block struct {
	G     *Group
	LN1   *nn.LayerNorm
	Attn  *Attention
	Drop1 *Dropout
	LN2   *nn.LayerNorm
	MLP   *MLP
	Drop2 *Dropout

	probs   *Dropout    // on the attention probabilities, the rank's heads
	partial []*nn.Param // gradients that are per-rank parts with sequence parallelism
	saved   []float32
	t       int // the last Forward's tokens per sequence, for headRow

	x1, x2, dx1, dx *nn.Tensor
}

// NewBlock declares the block's parameters under b (GPT-2's names, this
// rank's parts of the split ones) for a model of cfg, whose heads must
// divide by the group's size. Its dropouts draw from rng's streams named
// after name: "dropout/NAME.attn", "dropout/NAME.resid1" and
// "dropout/NAME.resid2".
func NewBlock(b *nn.Builder, g *Group, cfg nn.GPTConfig, rng *RNG, name string) (*Block, error) {
	if cfg.Heads%g.Size != 0 {
		return nil, fmt.Errorf("tp: %d heads do not divide over %d tensor-parallel ranks: pick a tensor-parallel size that divides the heads", cfg.Heads, g.Size)
	}
	c := cfg.Dim
	init := nn.Normal(0.02)
	proj := nn.Normal(0.02 / math.Sqrt(2*float64(cfg.Layers)))
	k := &Block{G: g, LN1: nn.NewLayerNorm(b.Scope("ln_1"), c)}
	k.Attn = NewAttention(b.Scope("attn"), g, c, cfg.Heads, init, proj)
	k.LN2 = nn.NewLayerNorm(b.Scope("ln_2"), c)
	k.MLP = NewMLP(b.Scope("mlp"), g, c, 4*c, init, proj)
	drop := func(stream string, row func(int) int) *Dropout {
		stream = "dropout/" + name + "." + stream
		return &Dropout{P: cfg.Dropout, Stream: rng.Stream(stream), Key: rng.Key(stream), Row: row}
	}
	k.probs = drop("attn", k.headRow)
	k.Drop1, k.Drop2 = drop("resid1", g.TokenRow), drop("resid2", g.TokenRow)
	if cfg.Dropout > 0 {
		k.Attn.Core.Drop = k.probs
	}
	k.partial = append(k.LN1.Params(), k.LN2.Params()...)
	k.partial = append(k.partial, k.Attn.Proj.B, k.MLP.Proj.B)
	return k, nil
}

// headRow maps a row of the rank's attention probabilities, [N, heads,
// T, T] for its heads, to the row of the unsplit layer's over the step's
// whole batch (Group.SetFirst).
func (k *Block) headRow(r int) int {
	per, first, heads, t := k.Attn.Core.Heads, k.Attn.First, k.Attn.Heads, k.t
	n, h, i := r/(per*t), (r/t)%per, r%t
	return ((k.G.first+n)*heads+first+h)*t + i
}

// TokenRow maps row r of the rank's token rows to the row of the step's
// whole batch (Group.SetFirst): its row in the micro-batch's activation
// (the identity without sequence parallelism), after the rows of the
// sequences before the micro-batch.
func (g *Group) TokenRow(r int) int {
	first, _ := g.RowBlock()
	return g.first*g.t + first + r
}

// Params lists the block's parameters in layout order (nn.Block's).
func (k *Block) Params() []*nn.Param {
	ps := append(k.LN1.Params(), k.Attn.Params()...)
	ps = append(ps, k.LN2.Params()...)
	return append(ps, k.MLP.Params()...)
}

// Shards lists which part of the whole parameter each of the block's is.
func (k *Block) Shards() []Shard {
	var s []Shard
	whole := func(ps ...*nn.Param) {
		for _, p := range ps {
			s = append(s, Shard{Param: p, Full: p.Shape, Dim: -1})
		}
	}
	whole(k.LN1.Params()...)
	s = append(s, k.Attn.Shards()...)
	whole(k.LN2.Params()...)
	return append(s, k.MLP.Shards()...)
}

// Partial lists the parameters whose gradients each rank computes only a
// part of, summed over the group by Backward: with sequence parallelism
// the LayerNorms' and the row-parallel biases'; none without.
func (k *Block) Partial() []*nn.Param {
	if !k.G.SeqParallel {
		return nil
	}
	return k.partial
}

// Forward returns the residual stream after the block.
func (k *Block) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	// Without sequence parallelism x is [..., T, C] and SetTokens is
	// optional: the attention's rows take T from x, as its core does.
	if _, k.t = k.G.Tokens(); !k.G.SeqParallel && len(x.Shape) >= 2 {
		k.t = x.Shape[len(x.Shape)-2]
	}
	k.x1 = nn.Resize(k.x1, x.Shape...)
	k.x2 = nn.Resize(k.x2, x.Shape...)
	a := k.Drop1.Forward(k.Attn.Forward(k.LN1.Forward(x, train), train), train)
	add(k.x1.Data, x.Data, a.Data)
	m := k.Drop2.Forward(k.MLP.Forward(k.LN2.Forward(k.x1, train), train), train)
	add(k.x2.Data, k.x1.Data, m.Data)
	return k.x2
}

// Backward adds the block's gradients and returns dL/dx.
func (k *Block) Backward(dy *nn.Tensor) *nn.Tensor {
	k.dx1 = nn.Resize(k.dx1, dy.Shape...)
	k.dx = nn.Resize(k.dx, dy.Shape...)
	sum := SumPartial(k.G, k.Partial(), &k.saved)
	d := k.LN2.Backward(k.MLP.Backward(k.Drop2.Backward(dy)))
	add(k.dx1.Data, dy.Data, d.Data)
	d = k.LN1.Backward(k.Attn.Backward(k.Drop1.Backward(k.dx1)))
	add(k.dx.Data, k.dx1.Data, d.Data)
	sum()
	return k.dx
}

// SumPartial prepares to sum over the group the gradients that a
// backward pass adds to ps (each rank's part of them): it sets them aside
// and zeroes them, and returns the function that, once the pass is done,
// all-reduces what the pass added and adds back what was set aside, so
// that gradients accumulated over earlier micro-batches are not summed
// again. saved is its scratch. With no ps or one rank it does nothing.
func SumPartial(g *Group, ps []*nn.Param, saved *[]float32) func() {
	if len(ps) == 0 || !g.split() {
		return func() {}
	}
	n := 0
	for _, p := range ps {
		n += p.Len()
	}
	if cap(*saved) < 2*n {
		*saved = make([]float32, 2*n)
	}
	old, buf := (*saved)[:n], (*saved)[n:2*n]
	at := 0
	for _, p := range ps {
		at += copy(old[at:], p.G)
		clear(p.G)
	}
	return func() {
		at := 0
		for _, p := range ps {
			at += copy(buf[at:], p.G)
		}
		g.allReduce("sequence-parallel gradients", buf)
		at = 0
		for _, p := range ps {
			for i := range p.G {
				p.G[i] = buf[at+i] + old[at+i]
			}
			at += p.Len()
		}
	}
}

// add sets dst to a + b, element-wise.
func add(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}
