package nn

import "math"

// Block is one pre-LN transformer block of GPT-2:
//
//	x = x + Drop1(Attn(LN1(x)))
//	x = x + Drop2(c_proj(GeLU(c_fc(LN2(x)))))
//
// with c_fc of C → 4C and c_proj of 4C → C. Its input is [B, T, C].
type Block struct {
	LN1   *LayerNorm // ln_1
	Attn  *Attention // attn
	LN2   *LayerNorm // ln_2
	FC    *Linear    // mlp.c_fc
	Act   GeLU
	Proj  *Linear  // mlp.c_proj
	Drop1 *Dropout // on the attention's output (nanoGPT's attn.resid_dropout)
	Drop2 *Dropout // on the MLP's output (nanoGPT's mlp.dropout)

	// Ready, if set, is called by Backward with each sub-layer's
	// parameters as soon as their gradients are complete: mlp.c_proj,
	// mlp.c_fc, ln_2, attn.c_proj, attn.c_attn, ln_1. Backward hands it
	// on to Attn.Ready; NewGPT sets it to the Store's Ready.
	Ready func(ps ...*Param)

	x1, x2  *Tensor // the residual stream after the attention and after the MLP
	dx1, dx *Tensor
}

// NewBlock declares a block's parameters under b with GPT-2's
// initialisation for a model of the configuration: linear weights from
// N(0, 0.02), the two residual projections' (attn.c_proj and mlp.c_proj)
// from N(0, 0.02/√(2·Layers)), biases zero, LayerNorm gains one. Its
// dropout layers, of probability cfg.Dropout (attention probabilities
// included), draw from s. The configuration must be valid.
func NewBlock(b *Builder, cfg GPTConfig, s *Stream) *Block {
	c := cfg.Dim
	init := Normal(gpt2Std)
	proj := Normal(gpt2Std / math.Sqrt(2*float64(cfg.Layers)))
	blk := &Block{LN1: NewLayerNorm(b.Scope("ln_1"), c)}
	blk.Attn = NewAttention(b.Scope("attn"), c, cfg.Heads, init, proj)
	blk.Attn.Drop = NewDropout(cfg.Dropout, s)
	blk.LN2 = NewLayerNorm(b.Scope("ln_2"), c)
	mlp := b.Scope("mlp")
	blk.FC = NewLinearInit(mlp.Scope("c_fc"), c, 4*c, true, init)
	blk.Proj = NewLinearInit(mlp.Scope("c_proj"), 4*c, c, true, proj)
	blk.Drop1 = NewDropout(cfg.Dropout, s)
	blk.Drop2 = NewDropout(cfg.Dropout, s)
	return blk
}

// gpt2Std is GPT-2's standard deviation for its initial weights.
const gpt2Std = 0.02

// Params lists the block's parameters in layout order.
func (k *Block) Params() []*Param {
	ps := append(k.LN1.Params(), k.Attn.Params()...)
	ps = append(ps, k.LN2.Params()...)
	ps = append(ps, k.FC.Params()...)
	return append(ps, k.Proj.Params()...)
}

// setStream makes all the block's dropout layers draw from s.
func (k *Block) setStream(s *Stream) {
	k.Attn.Drop.Stream, k.Drop1.Stream, k.Drop2.Stream = s, s, s
}

// Forward returns the residual stream after the block.
func (k *Block) Forward(x *Tensor, train bool) *Tensor {
	k.x1 = Resize(k.x1, x.Shape...)
	k.x2 = Resize(k.x2, x.Shape...)
	a := k.Drop1.Forward(k.Attn.Forward(k.LN1.Forward(x, train), train), train)
	add(k.x1.Data, x.Data, a.Data)
	h := k.Act.Forward(k.FC.Forward(k.LN2.Forward(k.x1, train), train), train)
	m := k.Drop2.Forward(k.Proj.Forward(h, train), train)
	add(k.x2.Data, k.x1.Data, m.Data)
	return k.x2
}

// Backward adds the block's gradients, reporting each sub-layer's
// parameters ready as it finishes, and returns dL/dx.
func (k *Block) Backward(dy *Tensor) *Tensor {
	k.dx1 = Resize(k.dx1, dy.Shape...)
	k.dx = Resize(k.dx, dy.Shape...)
	k.Attn.Ready = k.Ready

	d := k.Proj.Backward(k.Drop2.Backward(dy))
	k.ready(k.Proj.Params())
	d = k.FC.Backward(k.Act.Backward(d))
	k.ready(k.FC.Params())
	d = k.LN2.Backward(d)
	k.ready(k.LN2.Params())
	add(k.dx1.Data, dy.Data, d.Data)

	d = k.Attn.Backward(k.Drop1.Backward(k.dx1))
	d = k.LN1.Backward(d)
	k.ready(k.LN1.Params())
	add(k.dx.Data, k.dx1.Data, d.Data)
	return k.dx
}

func (k *Block) ready(ps []*Param) {
	if k.Ready != nil {
		k.Ready(ps...)
	}
}

// add sets dst to a + b, element-wise.
func add(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}
