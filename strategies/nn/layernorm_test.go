package nn

import (
	"math"
	"testing"
)

func TestLayerNormForward(t *testing.T) {
	b := NewBuilder()
	l := NewLayerNorm(b.Scope("ln"), 4)
	b.Build(1)
	copy(l.W.W, []float32{1, 2, 0.5, -1})
	copy(l.B.W, []float32{0, 1, 0, 3})
	x := FromData([]float32{1, 2, 3, 4, -2, -2, -2, -2}, 2, 4)
	y := l.Forward(x, false)
	// Row 0: mean 2.5, variance 1.25; row 1 is constant, so x̂ = 0.
	s := 1 / math.Sqrt(1.25+1e-5)
	want := []float64{-1.5 * s, 2*(-0.5*s) + 1, 0.5 * 0.5 * s, -1.5*s + 3, 0, 1, 0, 3}
	for i, w := range want {
		if math.Abs(float64(y.Data[i])-w) > 1e-5 {
			t.Errorf("y[%d] = %g, want %g", i, y.Data[i], w)
		}
	}
}

func TestLayerNormInit(t *testing.T) {
	b := NewBuilder()
	l := NewLayerNorm(b.Scope("ln"), 3)
	b.Build(1)
	for i := range l.W.W {
		if l.W.W[i] != 1 || l.B.W[i] != 0 {
			t.Fatalf("weight %v, bias %v: want ones and zeros", l.W.W, l.B.W)
		}
	}
	if l.W.Decay || l.B.Decay || l.Eps != 1e-5 {
		t.Errorf("decay %v/%v, eps %g: want no decay and eps 1e-5", l.W.Decay, l.B.Decay, l.Eps)
	}
	if l.W.Name != "ln.weight" || l.B.Name != "ln.bias" {
		t.Errorf("names %q, %q", l.W.Name, l.B.Name)
	}
}

func TestLayerNormGrad(t *testing.T) {
	b := NewBuilder()
	l := NewLayerNorm(b.Scope("ln"), 6)
	st := b.Build(1)
	perturb(st, 1, 0.5) // a gain of one and an offset of zero would hide terms
	checkLayer(t, l, randTensor(8, 2, 3, 6), true, nil, 1e-2, layerTol)
}
