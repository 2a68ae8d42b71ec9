package tp

import (
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// MLP is Megatron's parallel MLP, GPT-2's c_fc → GeLU → c_proj with the
// hidden width split over the group: c_fc column-parallel, c_proj
// row-parallel, so the GeLU needs no communication and the whole MLP one
// all-reduce forward (c_proj's g) and one backward (c_fc's f).
type MLP struct {
	FC   *ColumnLinear // mlp.c_fc: C → 4C, the rank's hidden columns
	Act  nn.GeLU
	Proj *RowLinear // mlp.c_proj: 4C → C, the rank's hidden rows
}

// NewMLP declares c_fc and c_proj under b (as b.Scope("c_fc") and
// b.Scope("c_proj")) for width dim and hidden width hidden, weights drawn
// by init and projInit, biases zero; the hidden units are cut over the
// group as prims.Block cuts them.
func NewMLP(b *nn.Builder, g *Group, dim, hidden int, init, projInit nn.Init) *MLP {
	lo, hi := g.Part(hidden)
	part := []Range{{lo, hi}}
	return &MLP{
		FC:   NewColumnLinear(b.Scope("c_fc"), g, dim, hidden, true, init, part),
		Proj: NewRowLinear(b.Scope("c_proj"), g, hidden, dim, true, projInit, part),
	}
}

// Params lists c_fc's parameters, then c_proj's.
func (m *MLP) Params() []*nn.Param { return append(m.FC.Params(), m.Proj.Params()...) }

// Shards lists which parts of the whole parameters this rank holds.
func (m *MLP) Shards() []Shard { return append(m.FC.Shards(), m.Proj.Shards()...) }

// Forward returns c_proj(gelu(c_fc(x))).
func (m *MLP) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	return m.Proj.Forward(m.Act.Forward(m.FC.Forward(x, train), train), train)
}

// Backward adds the gradients and returns dL/dx.
func (m *MLP) Backward(dy *nn.Tensor) *nn.Tensor {
	return m.FC.Backward(m.Act.Backward(m.Proj.Backward(dy)))
}

// Attention is Megatron's parallel self-attention: the heads are split
// over the group. c_attn is column-parallel, each rank computing q, k and
// v of its heads only; the attention of those heads needs nothing from
// the others; c_proj is row-parallel over the heads' columns. One
// all-reduce forward, one backward.
type Attention struct {
	Heads, Dim int // the whole layer's
	First      int // this rank's first head
	QKV        *ColumnLinear
	Core       nn.AttentionCore // this rank's heads
	Proj       *RowLinear
}

// NewAttention declares c_attn and c_proj under b for the rank's heads,
// cut evenly (heads must divide by the group's size, which the caller
// checks), weights drawn as the unsplit layer's would be.
func NewAttention(b *nn.Builder, g *Group, dim, heads int, init, projInit nn.Init) *Attention {
	per := heads / g.Size
	hd := dim / heads
	first := g.Rank * per
	lo, hi := first*hd, (first+per)*hd
	// The unsplit c_attn holds all heads' q, then k, then v: the rank
	// keeps its heads' columns of each.
	qkv := []Range{{lo, hi}, {dim + lo, dim + hi}, {2*dim + lo, 2*dim + hi}}
	return &Attention{
		Heads: heads, Dim: dim, First: first,
		QKV:  NewColumnLinear(b.Scope("c_attn"), g, dim, 3*dim, true, init, qkv),
		Core: nn.AttentionCore{Heads: per, HeadDim: hd},
		Proj: NewRowLinear(b.Scope("c_proj"), g, dim, dim, true, projInit, []Range{{lo, hi}}),
	}
}

// Params lists c_attn's parameters, then c_proj's.
func (a *Attention) Params() []*nn.Param { return append(a.QKV.Params(), a.Proj.Params()...) }

// Shards lists which parts of the whole parameters this rank holds.
func (a *Attention) Shards() []Shard { return append(a.QKV.Shards(), a.Proj.Shards()...) }

// Forward returns the attention's output for x ([N, T, C], or the rank's
// token rows with sequence parallelism).
func (a *Attention) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	// With sequence parallelism c_attn's all-gather returns [N, T, ·].
	return a.Proj.Forward(a.Core.Forward(a.QKV.Forward(x, train), train), train)
}

// Backward adds the gradients and returns dL/dx.
func (a *Attention) Backward(dy *nn.Tensor) *nn.Tensor {
	return a.QKV.Backward(a.Core.Backward(a.Proj.Backward(dy)))
}
