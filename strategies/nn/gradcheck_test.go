package nn

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// The gradient checks compare each Backward with central differences of a
// scalar computed in float64: L = Σ r_i·y_i with fixed random r for a
// layer, the loss for a model. The forward passes run in float32, so the
// step h is large (1e-2 on values of order one) and the tolerances allow
// for float32 rounding, but not for a missing term or a transposed
// product, which are off by the size of the gradient itself.

// tol passes a coordinate if |numeric - analytic| ≤ Abs + Rel·max(|numeric|,
// |analytic|); a whole buffer also needs ‖numeric - analytic‖ ≤ Rel·‖numeric‖.
type tol struct{ Abs, Rel float64 }

// wrt is a buffer that the scalar depends on and its analytic gradient.
type wrt struct {
	name string
	x    []float32 // perturbed in place and restored
	grad []float32
}

// checkGrad compares every coordinate of each wrt's gradient with
// (f(x+h) - f(x-h)) / 2h, dividing by the step that float32 really took.
func checkGrad(t *testing.T, f func() float64, h float64, tl tol, ws ...wrt) {
	t.Helper()
	for _, w := range ws {
		var bad int
		var num2, ana2, diff2, worst float64
		for i, orig := range w.x {
			w.x[i] = orig + float32(h)
			hp, fp := w.x[i], f()
			w.x[i] = orig - float32(h)
			hm, fm := w.x[i], f()
			w.x[i] = orig
			num := (fp - fm) / (float64(hp) - float64(hm))
			ana := float64(w.grad[i])
			d := math.Abs(num - ana)
			num2, ana2, diff2 = num2+num*num, ana2+ana*ana, diff2+d*d
			allowed := tl.Abs + tl.Rel*max(math.Abs(num), math.Abs(ana))
			worst = max(worst, d/allowed)
			if d > allowed {
				if bad++; bad <= 5 {
					t.Errorf("%s[%d]: analytic %.6g, numeric %.6g", w.name, i, ana, num)
				}
			}
		}
		t.Logf("%s: %d coordinates, worst error %.2f of the tolerance, ‖numeric‖ %.3g", w.name, len(w.x), worst, math.Sqrt(num2))
		switch {
		case bad > 5:
			t.Errorf("%s: %d of %d coordinates differ", w.name, bad, len(w.x))
		case ana2 == 0 && num2 == 0:
			t.Errorf("%s: the gradient is zero, so the check proves nothing", w.name)
		case math.Sqrt(diff2) > tl.Rel*math.Sqrt(num2):
			t.Errorf("%s: ‖analytic - numeric‖ = %.3g, ‖numeric‖ = %.3g", w.name, math.Sqrt(diff2), math.Sqrt(num2))
		}
	}
}

// randTensor draws a tensor from N(0, 1) with the test stream seed.
func randTensor(seed uint64, shape ...int) *Tensor {
	t := NewTensor(shape...)
	r := NewStream(seed, "test/x", 0)
	for i := range t.Data {
		t.Data[i] = float32(r.NormFloat64())
	}
	return t
}

// perturb adds N(0, std²) to every parameter, so that a check does not
// run at an initialisation where some gradients vanish (zero biases,
// gains of one) or are too small to tell from rounding.
func perturb(s *Store, seed uint64, std float64) {
	r := NewStream(seed, "test/perturb", 0)
	for i := range s.W {
		s.W[i] += float32(r.NormFloat64() * std)
	}
}

// checkLayer checks a layer's input and parameter gradients with
// L = Σ r_i·y_i, and that a second Backward doubles the parameters'
// gradients. before, if not nil, runs before every Forward (to restore a
// dropout stream, so that every Forward draws the same mask).
func checkLayer(t *testing.T, l Layer, x *Tensor, train bool, before func(), h float64, tl tol) {
	t.Helper()
	if before == nil {
		before = func() {}
	}
	ps := l.Params()
	for _, p := range ps {
		clear(p.G)
	}
	before()
	y := l.Forward(x, train)
	rs := NewStream(3, "test/r", 0)
	r := make([]float64, y.Len())
	dy := NewTensor(y.Shape...)
	for i := range r {
		dy.Data[i] = float32(rs.NormFloat64())
		r[i] = float64(dy.Data[i])
	}
	ws := []wrt{{"input", x.Data, append([]float32(nil), l.Backward(dy).Data...)}}
	for _, p := range ps {
		ws = append(ws, wrt{p.Name, p.W, append([]float32(nil), p.G...)})
	}
	dx := l.Backward(dy).Data
	for i, v := range ws[0].grad {
		if dx[i] != v {
			t.Errorf("input gradient[%d] %g from a second Backward, %g from the first: it must not accumulate", i, dx[i], v)
			break
		}
	}
	checkAccumulated(t, ps, ws[1:])
	f := func() float64 {
		before()
		return dot(r, l.Forward(x, train).Data)
	}
	checkGrad(t, f, h, tl, ws...)
}

// checkAccumulated says whether each parameter's gradient is twice the
// one recorded after a single Backward.
func checkAccumulated(t *testing.T, ps []*Param, once []wrt) {
	t.Helper()
	for i, p := range ps {
		for j, g := range p.G {
			want := 2 * once[i].grad[j]
			if math.Abs(float64(g-want)) > 1e-5*(1+math.Abs(float64(want))) {
				t.Errorf("%s[%d] after two Backward calls: %g, want twice %g", p.Name, j, g, once[i].grad[j])
				break
			}
		}
	}
}

func dot(r []float64, y []float32) float64 {
	var s float64
	for i, v := range y {
		s += r[i] * float64(v)
	}
	return s
}

// checkModel checks every parameter's gradient from Model.Backward
// against differences of the model's loss on b, and that a second
// Backward doubles them.
func checkModel(t *testing.T, m Model, b *Batch, train bool, before func(), h float64, tl tol) {
	t.Helper()
	if before == nil {
		before = func() {}
	}
	f := func() float64 {
		before()
		loss, err := m.Forward(b, train)
		if err != nil {
			t.Fatal(err)
		}
		return float64(loss)
	}
	st := m.Store()
	st.ZeroGrads()
	f()
	m.Backward(1)
	var ws []wrt
	for _, p := range st.Params {
		ws = append(ws, wrt{p.Name, p.W, append([]float32(nil), p.G...)})
	}
	m.Backward(1)
	checkAccumulated(t, st.Params, ws)
	checkGrad(t, f, h, tl, ws...)
}

var layerTol = tol{Abs: 1e-3, Rel: 1e-2}

func TestLinearGrad(t *testing.T) {
	for _, bias := range []bool{true, false} {
		b := NewBuilder()
		l := NewLinear(b.Scope("fc"), 5, 4, bias)
		b.Build(1)
		checkLayer(t, l, randTensor(2, 2, 3, 5), true, nil, 1e-2, layerTol)
	}
}

func TestLinearBackwardParams(t *testing.T) {
	b := NewBuilder()
	l := NewLinear(b.Scope("fc"), 5, 4, true)
	st := b.Build(1)
	x, dy := randTensor(2, 3, 5), randTensor(3, 3, 4)
	l.Forward(x, true)
	l.Backward(dy)
	want := append([]float32(nil), st.G...)
	st.ZeroGrads()
	l.BackwardParams(dy)
	for i := range want {
		if st.G[i] != want[i] {
			t.Fatalf("BackwardParams gradient[%d] = %g, Backward's %g", i, st.G[i], want[i])
		}
	}
}

func TestReLUGrad(t *testing.T) {
	x := randTensor(4, 3, 7)
	for i, v := range x.Data { // keep away from the kink at 0
		if math.Abs(float64(v)) < 0.1 {
			x.Data[i] = 0.1 + 0.5*v
		}
	}
	checkLayer(t, &ReLU{}, x, true, nil, 1e-2, layerTol)
}

func TestCrossEntropyGrad(t *testing.T) {
	logits := randTensor(5, 2, 3, 6)
	targets := []int32{0, 5, -1, 2, 2, -100}
	var ce CrossEntropy
	f := func() float64 {
		loss, err := ce.Forward(logits, targets)
		if err != nil {
			t.Fatal(err)
		}
		return float64(loss)
	}
	f()
	g := append([]float32(nil), ce.Backward(1).Data...)
	checkGrad(t, f, 1e-2, tol{Abs: 1e-4, Rel: 1e-2}, wrt{"logits", logits.Data, g})
	for i, v := range ce.Backward(2.5).Data {
		if math.Abs(float64(v-2.5*g[i])) > 1e-6 {
			t.Fatalf("Backward(2.5)[%d] = %g, want 2.5·%g", i, v, g[i])
		}
	}
	for r := 2 * 6; r < 3*6; r++ {
		if g[r] != 0 {
			t.Fatalf("ignored row's gradient[%d] = %g, want 0", r, g[r])
		}
	}
}

// TestCrossEntropyNothingToAverage: no rows is an error; rows whose
// targets are all ignored give PyTorch's NaN and a zero gradient.
func TestCrossEntropyNothingToAverage(t *testing.T) {
	var ce CrossEntropy
	if _, err := ce.Forward(NewTensor(0, 6), nil); !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "a batch of no rows") {
		t.Errorf("no rows: %v, want an ErrShape about a batch of no rows", err)
	}
	loss, err := ce.Forward(randTensor(5, 3, 6), []int32{-1, -1, -100})
	if err != nil || !math.IsNaN(float64(loss)) {
		t.Errorf("all ignored: %v, %v; want NaN, no error", loss, err)
	}
	for i, v := range ce.Backward(1).Data {
		if v != 0 {
			t.Fatalf("all ignored: gradient[%d] = %g, want 0", i, v)
		}
	}
}

func TestMLPGrad(t *testing.T) {
	m := NewMLP(1, 4, 6, 5, 3)
	perturb(m.Store(), 2, 0.1)
	x := randTensor(3, 5, 4)
	b := &Batch{N: 5, X: x.Data, XDim: 4, Y: []int32{0, 2, 1, 1, 0}}
	// A small step: ReLU's kinks must not fall inside x ± h.
	checkModel(t, m, b, true, nil, 1e-3, tol{Abs: 2e-4, Rel: 1e-2})
}
