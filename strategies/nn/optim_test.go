package nn

import (
	"math"
	"testing"
)

// optimStore has "w" (3 elements, decayed) then "b" (2, not decayed),
// all starting at one.
func optimStore() *Store {
	b := NewBuilder()
	b.Param("w", Ones(), true, 3)
	b.Param("b", Ones(), false, 2)
	return b.Build(1)
}

// optimGrads are the gradients of three steps.
var optimGrads = [][]float32{
	{0.5, -2, 0.1, 1, -0.3},
	{0.4, -1, -0.2, 1, 0.6},
	{-0.1, 0.5, 0.3, 1, 0.2},
}

var optimDecay = []bool{true, true, true, false, false}

func TestSGDByHand(t *testing.T) {
	// w and b both start at one; each step's gradient is one for every
	// element. Worked by hand from torch.optim.SGD's documented update.
	tests := []struct {
		name   string
		cfg    SGDConfig
		w0, b0 []float64 // after one step
		w1, b1 []float64 // after two
	}{
		{"plain", SGDConfig{LR: 0.1}, []float64{0.9}, []float64{0.9}, []float64{0.8}, []float64{0.8}},
		// buf = 1, w = 1 - 0.1; buf = 0.9 + 1 = 1.9, w = 0.9 - 0.19.
		{"momentum", SGDConfig{LR: 0.1, Momentum: 0.9}, []float64{0.9}, []float64{0.9}, []float64{0.71}, []float64{0.71}},
		// d = 1 + 0.9·1 = 1.9; buf = 1.9, d = 1 + 0.9·1.9 = 2.71.
		{"nesterov", SGDConfig{LR: 0.1, Momentum: 0.9, Nesterov: true}, []float64{0.81}, []float64{0.81}, []float64{0.539}, []float64{0.539}},
		// w: d = 1 + 0.5·1 = 1.5, w = 0.85; d = 1 + 0.5·0.85, w = 0.7075. b has no decay.
		{"weight decay", SGDConfig{LR: 0.1, WeightDecay: 0.5}, []float64{0.85}, []float64{0.9}, []float64{0.7075}, []float64{0.8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := optimStore()
			o, err := NewSGD(tt.cfg, st.Params, 0, len(st.W))
			if err != nil {
				t.Fatal(err)
			}
			for step, want := range [][2][]float64{{tt.w0, tt.b0}, {tt.w1, tt.b1}} {
				for i := range st.G {
					st.G[i] = 1
				}
				o.Step(st.W, st.G)
				for i, v := range st.W {
					w := want[0][0]
					if i >= 3 {
						w = want[1][0]
					}
					if math.Abs(float64(v)-w) > 1e-6 {
						t.Errorf("step %d: element %d = %.7f, want %.7f", step+1, i, v, w)
					}
				}
			}
		})
	}
}

// refSGD is torch.optim.SGD's update (dampening 0) in float64, for the
// elements lo..hi of optimStore, over optimGrads.
func refSGD(cfg SGDConfig, lo, hi int) []float64 {
	w := []float64{1, 1, 1, 1, 1}[lo:hi]
	buf := make([]float64, len(w))
	mu := float64(cfg.Momentum)
	for step, g := range optimGrads {
		for i := range w {
			d := float64(g[lo+i])
			if optimDecay[lo+i] {
				d += float64(cfg.WeightDecay) * w[i]
			}
			if mu != 0 {
				if step == 0 {
					buf[i] = d
				} else {
					buf[i] = mu*buf[i] + d
				}
				if cfg.Nesterov {
					d += mu * buf[i]
				} else {
					d = buf[i]
				}
			}
			w[i] -= float64(cfg.LR) * d
		}
	}
	return w
}

func TestSGDReference(t *testing.T) {
	for _, cfg := range []SGDConfig{
		{LR: 0.1},
		{LR: 0.05, Momentum: 0.9, WeightDecay: 0.1},
		{LR: 0.05, Momentum: 0.8, WeightDecay: 0.2, Nesterov: true},
	} {
		for _, r := range [][2]int{{0, 5}, {2, 5}, {1, 3}} { // whole, a shard across both, a part of w
			checkOptimizer(t, cfg, r[0], r[1], refSGD(cfg, r[0], r[1]), func(st *Store) (Optimizer, error) {
				return NewSGD(cfg, st.Params, r[0], r[1])
			})
		}
	}
}

// checkOptimizer steps an optimizer over [lo, hi) of optimStore through
// optimGrads and compares the parameters with want.
func checkOptimizer(t *testing.T, cfg any, lo, hi int, want []float64, newOpt func(*Store) (Optimizer, error)) {
	t.Helper()
	st := optimStore()
	o, err := newOpt(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range optimGrads {
		copy(st.G, g)
		o.Step(st.W[lo:hi], st.G[lo:hi])
	}
	for i, w := range want {
		if math.Abs(float64(st.W[lo+i])-w) > 1e-6 {
			t.Errorf("%+v over [%d, %d): element %d = %.7f, want %.7f", cfg, lo, hi, lo+i, st.W[lo+i], w)
		}
	}
}

func TestAdamWByHand(t *testing.T) {
	// With a constant gradient, m̂ = g and v̂ = g², so each step moves by
	// lr·g/|g| = lr after the decoupled decay w·(1 - lr·wd) = w·0.99.
	st := optimStore()
	cfg := AdamWConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	o, err := NewAdamW(cfg, st.Params, 0, len(st.W))
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]float64{{0.89, 0.9}, {0.7811, 0.8}, {0.673289, 0.7}} // decayed w, undecayed b
	for step, w := range want {
		for i := range st.G {
			st.G[i] = 1
		}
		o.Step(st.W, st.G)
		for i, v := range st.W {
			if e := w[i/3]; math.Abs(float64(v)-e) > 1e-6 {
				t.Errorf("step %d: element %d = %.7f, want %.7f", step+1, i, v, e)
			}
		}
	}
	if s := o.State(); s[2].I64[0] != 3 {
		t.Errorf("step count %d, want 3", s[2].I64[0])
	}
}

// refAdamW is torch.optim.AdamW's update in float64, for the elements
// lo..hi of optimStore, over optimGrads.
func refAdamW(c AdamWConfig, lo, hi int) []float64 {
	w := []float64{1, 1, 1, 1, 1}[lo:hi]
	m, v := make([]float64, len(w)), make([]float64, len(w))
	lr, b1, b2 := float64(c.LR), float64(c.Beta1), float64(c.Beta2)
	for step, g := range optimGrads {
		t := float64(step + 1)
		for i := range w {
			gi := float64(g[lo+i])
			if optimDecay[lo+i] {
				w[i] *= 1 - lr*float64(c.WeightDecay)
			}
			m[i] = b1*m[i] + (1-b1)*gi
			v[i] = b2*v[i] + (1-b2)*gi*gi
			mhat := m[i] / (1 - math.Pow(b1, t))
			vhat := v[i] / (1 - math.Pow(b2, t))
			w[i] -= lr * mhat / (math.Sqrt(vhat) + float64(c.Eps))
		}
	}
	return w
}

func TestAdamWReference(t *testing.T) {
	for _, cfg := range []AdamWConfig{
		DefaultAdamW(),
		{LR: 0.05, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.3},
	} {
		for _, r := range [][2]int{{0, 5}, {2, 5}, {3, 4}} {
			checkOptimizer(t, cfg, r[0], r[1], refAdamW(cfg, r[0], r[1]), func(st *Store) (Optimizer, error) {
				return NewAdamW(cfg, st.Params, r[0], r[1])
			})
		}
	}
}
