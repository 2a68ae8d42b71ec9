package nn

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

var tinyGPT = GPTConfig{Vocab: 11, Context: 6, Layers: 2, Heads: 2, Dim: 8}

// tinyBatch is n sequences of t tokens from a fixed stream, targets the
// next tokens.
func tinyBatch(cfg GPTConfig, n, t int) *Batch {
	r := NewStream(5, "test/tokens", 0)
	b := &Batch{N: n, T: t, Tokens: make([]int32, n*t), Y: make([]int32, n*t)}
	for i := range b.Tokens {
		b.Tokens[i] = int32(r.IntN(cfg.Vocab))
		b.Y[i] = int32(r.IntN(cfg.Vocab))
	}
	return b
}

func newTinyGPT(t *testing.T, cfg GPTConfig, seed uint64) *GPT {
	t.Helper()
	g, err := NewGPT(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGPTConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*GPTConfig)
		valid bool
	}{
		{"tiny", func(*GPTConfig) {}, true},
		{"dropout", func(c *GPTConfig) { c.Dropout = 0.5 }, true},
		{"dim not divisible by heads", func(c *GPTConfig) { c.Heads = 3 }, false},
		{"no vocabulary", func(c *GPTConfig) { c.Vocab = 0 }, false},
		{"no context", func(c *GPTConfig) { c.Context = 0 }, false},
		{"no layers", func(c *GPTConfig) { c.Layers = 0 }, false},
		{"no heads", func(c *GPTConfig) { c.Heads = 0 }, false},
		{"negative dim", func(c *GPTConfig) { c.Dim = -8 }, false},
		{"dropout 1", func(c *GPTConfig) { c.Dropout = 1 }, false},
		{"negative dropout", func(c *GPTConfig) { c.Dropout = -0.1 }, false},
		{"NaN dropout", func(c *GPTConfig) { c.Dropout = float32(math.NaN()) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tinyGPT
			tt.edit(&cfg)
			err := cfg.Validate()
			if (err == nil) != tt.valid || (err != nil && !errors.Is(err, ErrConfig)) {
				t.Fatalf("Validate() = %v, valid %v", err, tt.valid)
			}
			if _, err := NewGPT(cfg, 1); (err == nil) != tt.valid {
				t.Fatalf("NewGPT error %v, valid %v", err, tt.valid)
			}
		})
	}
	if err := DefaultGPTConfig().Validate(); err != nil {
		t.Errorf("DefaultGPTConfig: %v", err)
	}
}

func TestGPTParams(t *testing.T) {
	g := newTinyGPT(t, tinyGPT, 1)
	C, V := tinyGPT.Dim, tinyGPT.Vocab
	want := []struct {
		name  string
		shape []int
		decay bool
	}{
		{"wte.weight", []int{V, C}, true},
		{"wpe.weight", []int{tinyGPT.Context, C}, true},
	}
	for l := 0; l < tinyGPT.Layers; l++ {
		h := fmt.Sprintf("h.%d.", l)
		want = append(want, []struct {
			name  string
			shape []int
			decay bool
		}{
			{h + "ln_1.weight", []int{C}, false}, {h + "ln_1.bias", []int{C}, false},
			{h + "attn.c_attn.weight", []int{C, 3 * C}, true}, {h + "attn.c_attn.bias", []int{3 * C}, false},
			{h + "attn.c_proj.weight", []int{C, C}, true}, {h + "attn.c_proj.bias", []int{C}, false},
			{h + "ln_2.weight", []int{C}, false}, {h + "ln_2.bias", []int{C}, false},
			{h + "mlp.c_fc.weight", []int{C, 4 * C}, true}, {h + "mlp.c_fc.bias", []int{4 * C}, false},
			{h + "mlp.c_proj.weight", []int{4 * C, C}, true}, {h + "mlp.c_proj.bias", []int{C}, false},
		}...)
	}
	want = append(want, []struct {
		name  string
		shape []int
		decay bool
	}{{"ln_f.weight", []int{C}, false}, {"ln_f.bias", []int{C}, false}, {"lm_head.weight", []int{C, V}, true}}...)
	ps := g.Store().Params
	if len(ps) != len(want) {
		t.Fatalf("parameters %s, want %d", g.Store().Names(), len(want))
	}
	for i, w := range want {
		if p := ps[i]; p.Name != w.name || !sameShape(p.Shape, w.shape) || p.Decay != w.decay {
			t.Errorf("parameter %d: %s %v decay %v, want %s %v decay %v", i, p.Name, p.Shape, p.Decay, w.name, w.shape, w.decay)
		}
	}
	if n := len(g.Store().W); n != tinyGPT.NumParams() {
		t.Errorf("%d parameters, NumParams says %d", n, tinyGPT.NumParams())
	}
}

func TestGPTInit(t *testing.T) {
	cfg := GPTConfig{Vocab: 16, Context: 8, Layers: 2, Heads: 4, Dim: 64}
	a, b, c := newTinyGPT(t, cfg, 7), newTinyGPT(t, cfg, 7), newTinyGPT(t, cfg, 8)
	same, differ := true, false
	for i := range a.Store().W {
		same = same && a.Store().W[i] == b.Store().W[i]
		differ = differ || a.Store().W[i] != c.Store().W[i]
	}
	if !same || !differ {
		t.Errorf("same seed gives identical weights: %v; another seed differs: %v", same, differ)
	}
	st := a.Store()
	for _, tt := range []struct {
		name string
		std  float64
	}{
		{"wte.weight", 0.02}, {"h.1.attn.c_attn.weight", 0.02}, {"h.0.mlp.c_fc.weight", 0.02}, {"lm_head.weight", 0.02},
		{"h.0.attn.c_proj.weight", 0.01}, {"h.1.mlp.c_proj.weight", 0.01}, // 0.02/√(2·2)
		{"h.0.ln_1.bias", 0}, {"h.0.attn.c_attn.bias", 0}, {"ln_f.bias", 0},
	} {
		if got := rms(st.Param(tt.name).W); math.Abs(got-tt.std) > 0.1*tt.std {
			t.Errorf("%s: standard deviation %.4f, want %.4f", tt.name, got, tt.std)
		}
	}
	for _, v := range st.Param("h.1.ln_2.weight").W {
		if v != 1 {
			t.Fatalf("h.1.ln_2.weight holds %g, want ones", v)
		}
	}
}

func rms(w []float32) float64 {
	var s float64
	for _, v := range w {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(w)))
}

func TestGPTGrad(t *testing.T) {
	cfg := tinyGPT
	cfg.Dropout = 0.1
	g := newTinyGPT(t, cfg, 1)
	perturb(g.Store(), 2, 0.2) // GPT-2's 0.02 leaves gradients too small to check in float32
	state, _ := g.DropoutStream().MarshalBinary()
	restore := func() { g.DropoutStream().UnmarshalBinary(state) }
	b := tinyBatch(cfg, 2, 5)
	b.Y[3] = -1 // an ignored target
	checkModel(t, g, b, true, restore, 1e-2, tol{Abs: 1e-4, Rel: 1e-2})
}

func TestGPTReadyOrder(t *testing.T) {
	g := newTinyGPT(t, tinyGPT, 1)
	var got []string
	g.Store().OnReady(func(p *Param) { got = append(got, p.Name) })
	if _, err := g.Forward(tinyBatch(tinyGPT, 2, 3), true); err != nil {
		t.Fatal(err)
	}
	g.Backward(1)
	// Reverse layout order: the top of the flat buffer first, each
	// layer's bias before its weight.
	want := []string{"lm_head.weight", "ln_f.bias", "ln_f.weight"}
	for l := tinyGPT.Layers - 1; l >= 0; l-- {
		for _, n := range []string{"mlp.c_proj.bias", "mlp.c_proj.weight", "mlp.c_fc.bias", "mlp.c_fc.weight",
			"ln_2.bias", "ln_2.weight", "attn.c_proj.bias", "attn.c_proj.weight",
			"attn.c_attn.bias", "attn.c_attn.weight", "ln_1.bias", "ln_1.weight"} {
			want = append(want, fmt.Sprintf("h.%d.%s", l, n))
		}
	}
	want = append(want, "wpe.weight", "wte.weight")
	if !equalStrings(got, want) {
		t.Errorf("ready order\n%v\nwant\n%v", got, want)
	}
}

func TestMLPReadyOrder(t *testing.T) {
	m := NewMLP(1, 3, 4, 2)
	var got []string
	m.Store().OnReady(func(p *Param) { got = append(got, p.Name) })
	b := &Batch{N: 2, X: []float32{1, 2, 3, 4, 5, 6}, XDim: 3, Y: []int32{0, 1}}
	if _, err := m.Forward(b, true); err != nil {
		t.Fatal(err)
	}
	m.Backward(1)
	if want := []string{"fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight"}; !equalStrings(got, want) {
		t.Errorf("ready order %v, want %v", got, want)
	}
}
