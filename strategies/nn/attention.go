package nn

import (
	"fmt"
	"math"
)

// Attention is multi-head causal self-attention over [B, T, C] (GPT-2's
// CausalSelfAttention without its residual dropout, which Block applies):
//
//	q, k, v = split(x·W_attn + b_attn)           C → 3C, then H heads of C/H
//	P = softmax(q·kᵀ/√(C/H) masked to j ≤ i)      per batch row and head
//	y = merge(Drop(P)·v)·W_proj + b_proj          C → C
//
// The middle line is an AttentionCore, which tensor parallelism reuses
// with a slice of the heads. An input of shape [T, C] is one sequence;
// any leading dimensions before T are batch dimensions.
type Attention struct {
	Heads, Dim int
	QKV        *Linear  // c_attn: [C, 3C], q then k then v
	Proj       *Linear  // c_proj: [C, C]
	Drop       *Dropout // on the attention probabilities; nil for none

	// Ready, if set, is called by Backward with c_proj's parameters as
	// soon as their gradients are complete, and then with c_attn's.
	Ready func(ps ...*Param)

	core AttentionCore
}

// NewAttention declares c_attn and c_proj under b, their weights drawn by
// init and projInit and their biases zero (GPT-2 draws both from
// Normal(0.02), c_proj's scaled by 1/√(2·layers)). It panics if heads does
// not divide dim, which is a programming error: GPTConfig.Validate
// reports it as an error.
func NewAttention(b *Builder, dim, heads int, init, projInit Init) *Attention {
	if heads <= 0 || dim%heads != 0 {
		panic(fmt.Sprintf("nn: attention of width %d cannot have %d heads", dim, heads))
	}
	return &Attention{
		Heads: heads,
		Dim:   dim,
		QKV:   NewLinearInit(b.Scope("c_attn"), dim, 3*dim, true, init),
		Proj:  NewLinearInit(b.Scope("c_proj"), dim, dim, true, projInit),
		core:  AttentionCore{Heads: heads, HeadDim: dim / heads},
	}
}

// Params lists c_attn's parameters, then c_proj's.
func (a *Attention) Params() []*Param { return append(a.QKV.Params(), a.Proj.Params()...) }

// Forward returns the attention's output, of x's shape. It panics if x's
// last dimension is not Dim, which is a programming error.
func (a *Attention) Forward(x *Tensor, train bool) *Tensor {
	if x.Cols() != a.Dim {
		panic(fmt.Sprintf("nn: attention of width %d given input of shape %v", a.Dim, x.Shape))
	}
	a.core.Heads, a.core.HeadDim, a.core.Drop = a.Heads, a.Dim/a.Heads, nil
	if a.Drop != nil {
		a.core.Drop = a.Drop
	}
	return a.Proj.Forward(a.core.Forward(a.QKV.Forward(x, train), train), train)
}

// Backward adds the gradients of c_proj and c_attn and returns dL/dx.
func (a *Attention) Backward(dy *Tensor) *Tensor {
	dctx := a.Proj.Backward(dy)
	a.ready(a.Proj.Params())
	dx := a.QKV.Backward(a.core.Backward(dctx))
	a.ready(a.QKV.Params())
	return dx
}

func (a *Attention) ready(ps []*Param) {
	if a.Ready != nil {
		a.Ready(ps...)
	}
}

// AttentionCore is causal multi-head attention between the projections:
// from q, k and v side by side in each row of its input, [..., T, 3·H·hd]
// (all heads' q, then all k, then all v), to the heads' outputs merged,
// [..., T, H·hd]:
//
//	P = softmax(q·kᵀ/√hd masked to j ≤ i)      per batch row and head
//	y = merge(Drop(P)·v)
//
// The products go through matmul, one per batch row and head, on
// contiguous per-head copies of q, k and v. Drop, if set, is applied to
// P (a [B, H, T, T] tensor) while training.
type AttentionCore struct {
	Heads, HeadDim int
	Drop           Layer

	b, t       int
	q, k, v, o *Tensor // per-head copies, [B, H, T, hd]
	att        *Tensor // softmax probabilities, [B, H, T, T]
	pd         *Tensor // att after Drop (att itself without dropout)
	ctx        *Tensor // o with the heads merged, [B, T, H·hd]

	dO, dq, dk, dv *Tensor // gradients of the per-head tensors
	datt           *Tensor // gradient of the probabilities, then of the scores
	dqkv           *Tensor // [B, T, 3·H·hd]
}

// Forward returns the merged heads' outputs; the result is the core's
// until its next call. It panics if qkv's last dimension is not
// 3·Heads·HeadDim, which is a programming error.
func (a *AttentionCore) Forward(qkv *Tensor, train bool) *Tensor {
	w := a.Heads * a.HeadDim
	if qkv.Cols() != 3*w {
		panic(fmt.Sprintf("nn: attention of %d heads of %d given q, k, v of shape %v", a.Heads, a.HeadDim, qkv.Shape))
	}
	a.t = 1
	if len(qkv.Shape) >= 2 {
		a.t = qkv.Shape[len(qkv.Shape)-2]
	}
	a.b = qkv.Rows() / a.t
	B, H, T, hd := a.b, a.Heads, a.t, a.HeadDim
	for _, p := range []**Tensor{&a.q, &a.k, &a.v, &a.o} {
		*p = Resize(*p, B, H, T, hd)
	}
	a.att = Resize(a.att, B, H, T, T)
	a.ctx = Resize(a.ctx, withCols(qkv.Shape, w)...)

	a.heads(a.q.Data, qkv.Data, 3*w, 0, false)
	a.heads(a.k.Data, qkv.Data, 3*w, w, false)
	a.heads(a.v.Data, qkv.Data, 3*w, 2*w, false)
	a.scores()
	a.pd = a.att
	if a.Drop != nil {
		a.pd = a.Drop.Forward(a.att, train)
	}
	for bh := 0; bh < B*H; bh++ {
		tt, th := bh*T*T, bh*T*hd
		matmul(false, false, T, hd, T, a.pd.Data[tt:tt+T*T], a.v.Data[th:th+T*hd], 0, a.o.Data[th:th+T*hd])
	}
	a.heads(a.o.Data, a.ctx.Data, w, 0, true)
	return a.ctx
}

// scores fills att with the causal softmax of q·kᵀ/√(C/H): row i of a
// head's [T, T] block holds its probabilities over j ≤ i and zeros after.
func (a *AttentionCore) scores() {
	T, hd := a.t, a.HeadDim
	scale := float32(1 / math.Sqrt(float64(hd)))
	for bh := 0; bh < a.b*a.Heads; bh++ {
		s := a.att.Data[bh*T*T : (bh+1)*T*T]
		th := bh * T * hd
		matmul(false, true, T, T, hd, a.q.Data[th:th+T*hd], a.k.Data[th:th+T*hd], 0, s)
		for i := 0; i < T; i++ {
			row := s[i*T : (i+1)*T]
			for j := 0; j <= i; j++ {
				row[j] *= scale
			}
			softmax(row[:i+1], row[:i+1])
			clear(row[i+1:])
		}
	}
}

// heads copies between per-head [B, H, T, hd] data and rows of [B, T, ·]
// with the given stride whose heads start at column off: from the rows
// into hs, or, if merge, from hs into the rows.
func (a *AttentionCore) heads(hs, rows []float32, stride, off int, merge bool) {
	B, H, T, hd := a.b, a.Heads, a.t, a.HeadDim
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			row := rows[(b*T+t)*stride+off:]
			for h := 0; h < H; h++ {
				p := hs[((b*H+h)*T+t)*hd : ((b*H+h)*T+t+1)*hd]
				if merge {
					copy(row[h*hd:(h+1)*hd], p)
				} else {
					copy(p, row[h*hd:(h+1)*hd])
				}
			}
		}
	}
}

// Backward returns the gradient of q, k and v, [..., T, 3·H·hd], from
// that of the merged outputs.
func (a *AttentionCore) Backward(dctx *Tensor) *Tensor {
	B, H, T, hd := a.b, a.Heads, a.t, a.HeadDim
	w := H * hd
	for _, p := range []**Tensor{&a.dO, &a.dq, &a.dk, &a.dv} {
		*p = Resize(*p, B, H, T, hd)
	}
	a.datt = Resize(a.datt, B, H, T, T)
	a.dqkv = Resize(a.dqkv, withCols(a.ctx.Shape, 3*w)...)

	a.heads(a.dO.Data, dctx.Data, w, 0, false)
	for bh := 0; bh < B*H; bh++ {
		tt, th := bh*T*T, bh*T*hd
		dO := a.dO.Data[th : th+T*hd]
		matmul(false, true, T, T, hd, dO, a.v.Data[th:th+T*hd], 0, a.datt.Data[tt:tt+T*T])
		matmul(true, false, T, hd, T, a.pd.Data[tt:tt+T*T], dO, 0, a.dv.Data[th:th+T*hd])
	}
	dp := a.datt
	if a.Drop != nil {
		dp = a.Drop.Backward(a.datt)
	}
	a.softmaxBackward(dp)
	for bh := 0; bh < B*H; bh++ {
		tt, th := bh*T*T, bh*T*hd
		ds := a.datt.Data[tt : tt+T*T]
		matmul(false, false, T, hd, T, ds, a.k.Data[th:th+T*hd], 0, a.dq.Data[th:th+T*hd])
		matmul(true, false, T, hd, T, ds, a.q.Data[th:th+T*hd], 0, a.dk.Data[th:th+T*hd])
	}
	a.heads(a.dq.Data, a.dqkv.Data, 3*w, 0, true)
	a.heads(a.dk.Data, a.dqkv.Data, 3*w, w, true)
	a.heads(a.dv.Data, a.dqkv.Data, 3*w, 2*w, true)
	return a.dqkv
}

// softmaxBackward writes into datt the gradient of the scaled scores from
// dp, that of the probabilities: per row, dS_j = P_j·(dp_j - Σ_k P_k·dp_k)
// times the scale for j ≤ i, and zero where the mask hid the score. dp
// may be datt itself.
func (a *AttentionCore) softmaxBackward(dp *Tensor) {
	T := a.t
	scale := 1 / math.Sqrt(float64(a.HeadDim))
	for r := 0; r < a.b*a.Heads*T; r++ {
		i := r % T
		p := a.att.Data[r*T : r*T+i+1]
		g := dp.Data[r*T : r*T+i+1]
		var dot float64
		for j, pj := range p {
			dot += float64(pj) * float64(g[j])
		}
		ds := a.datt.Data[r*T : (r+1)*T]
		for j, pj := range p {
			ds[j] = float32(float64(pj) * (float64(g[j]) - dot) * scale)
		}
		clear(ds[i+1:])
	}
}
