package nn

import (
	"math"
	"testing"
)

func newTestAttention(dim, heads int, p float32) (*Attention, *Store) {
	b := NewBuilder()
	a := NewAttention(b.Scope("attn"), dim, heads, Normal(0.5), Normal(0.5))
	if p > 0 {
		a.Drop = NewDropout(p, NewStream(1, "dropout", 0))
	}
	st := b.Build(1)
	perturb(st, 2, 0.1) // non-zero biases
	return a, st
}

// refAttention is causal multi-head self-attention written plainly, in
// float64, from x [B, T, C] and the layer's weights.
func refAttention(a *Attention, x *Tensor) []float64 {
	C, H := a.Dim, a.Heads
	hd, T := C/H, x.Shape[len(x.Shape)-2]
	B := x.Rows() / T
	lin := func(in []float64, l *Linear) []float64 {
		out := make([]float64, l.Out)
		for o := range out {
			out[o] = float64(l.B.W[o])
			for i, v := range in {
				out[o] += v * float64(l.W.W[i*l.Out+o])
			}
		}
		return out
	}
	qkv := make([][]float64, B*T)
	for r := range qkv {
		in := make([]float64, C)
		for i := range in {
			in[i] = float64(x.Data[r*C+i])
		}
		qkv[r] = lin(in, a.QKV)
	}
	y := make([]float64, 0, B*T*C)
	for b := 0; b < B; b++ {
		for i := 0; i < T; i++ {
			ctx := make([]float64, C)
			for h := 0; h < H; h++ {
				q := qkv[b*T+i][h*hd : (h+1)*hd]
				w := make([]float64, i+1)
				var m, sum float64 = math.Inf(-1), 0
				for j := 0; j <= i; j++ {
					k := qkv[b*T+j][C+h*hd : C+(h+1)*hd]
					for d := range q {
						w[j] += q[d] * k[d] / math.Sqrt(float64(hd))
					}
					m = max(m, w[j])
				}
				for j := range w {
					w[j] = math.Exp(w[j] - m)
					sum += w[j]
				}
				for j := range w {
					v := qkv[b*T+j][2*C+h*hd : 2*C+(h+1)*hd]
					for d := range v {
						ctx[h*hd+d] += w[j] / sum * v[d]
					}
				}
			}
			y = append(y, lin(ctx, a.Proj)...)
		}
	}
	return y
}

func TestAttentionForward(t *testing.T) {
	for _, shape := range [][]int{{2, 5, 12}, {5, 12}} {
		a, _ := newTestAttention(12, 3, 0)
		x := randTensor(3, shape...)
		y := a.Forward(x, false)
		if !sameShape(y.Shape, shape) {
			t.Fatalf("output shape %v, want %v", y.Shape, shape)
		}
		for i, w := range refAttention(a, x) {
			if math.Abs(float64(y.Data[i])-w) > 1e-4*(1+math.Abs(w)) {
				t.Fatalf("shape %v: y[%d] = %g, want %g", shape, i, y.Data[i], w)
			}
		}
	}
}

func TestAttentionGrad(t *testing.T) {
	tests := []struct {
		name        string
		heads, t, c int
		p           float32
	}{
		{"one head", 1, 4, 4, 0},
		{"three heads", 3, 5, 6, 0},
		{"dropout", 2, 4, 8, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := newTestAttention(tt.c, tt.heads, tt.p)
			var restore func()
			if a.Drop != nil {
				state, _ := a.Drop.Stream.MarshalBinary()
				restore = func() { a.Drop.Stream.UnmarshalBinary(state) }
			}
			x := randTensor(4, 2, tt.t, tt.c)
			checkLayer(t, a, x, true, restore, 1e-2, layerTol)
		})
	}
}

func TestAttentionCausal(t *testing.T) {
	a, _ := newTestAttention(8, 2, 0)
	const T = 6
	x := randTensor(5, 2, T, 8)
	want := append([]float32(nil), a.Forward(x, false).Data...)
	for i := 0; i < 8; i++ { // change the last position of sequence 0
		x.Data[(T-1)*8+i] += 1
	}
	got := a.Forward(x, false).Data
	for i := range got {
		changed := math.Abs(float64(got[i]-want[i])) > 1e-6
		last := i/8 == T-1
		if changed != last {
			t.Fatalf("output %d (position %d of sequence %d) changed: %v, want %v", i, i/8%T, i/8/T, changed, last)
		}
	}
}

func TestAttentionReadyOrder(t *testing.T) {
	a, _ := newTestAttention(4, 2, 0)
	var got []string
	a.Ready = func(ps ...*Param) {
		for _, p := range ps {
			got = append(got, p.Name)
		}
	}
	x := randTensor(1, 1, 3, 4)
	a.Backward(a.Forward(x, true))
	want := []string{"attn.c_proj.weight", "attn.c_proj.bias", "attn.c_attn.weight", "attn.c_attn.bias"}
	if !equalStrings(got, want) {
		t.Errorf("ready %v, want %v", got, want)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
