package nn

import (
	"errors"
	"math"
	"testing"
)

func TestGPTBatchErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Batch)
		want error
	}{
		{"token = vocab", func(b *Batch) { b.Tokens[4] = int32(tinyGPT.Vocab) }, ErrIndex},
		{"negative token", func(b *Batch) { b.Tokens[0] = -1 }, ErrIndex},
		{"target = vocab", func(b *Batch) { b.Y[2] = int32(tinyGPT.Vocab) }, ErrIndex},
		{"longer than the context", func(b *Batch) {
			b.T, b.N = 2*b.T, b.N/2 // 2 sequences of 6 become 1 of 12
		}, ErrShape},
		{"too few tokens", func(b *Batch) { b.Tokens = b.Tokens[1:] }, ErrShape},
		{"too few targets", func(b *Batch) { b.Y = b.Y[1:] }, ErrShape},
		{"no sequences", func(b *Batch) { b.N = 0 }, ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTinyGPT(t, tinyGPT, 1)
			b := tinyBatch(tinyGPT, 2, tinyGPT.Context)
			tt.edit(b)
			if _, err := g.Forward(b, true); !errors.Is(err, tt.want) {
				t.Errorf("Forward error %v, want one wrapping %v", err, tt.want)
			}
		})
	}
}

func TestGPTShorterSequences(t *testing.T) {
	// One model runs batches of any T up to its context, in any order.
	g := newTinyGPT(t, tinyGPT, 1)
	for _, shape := range [][2]int{{2, 6}, {3, 1}, {1, 4}, {2, 6}} {
		b := tinyBatch(tinyGPT, shape[0], shape[1])
		loss, err := g.Forward(b, true)
		if err != nil || math.IsNaN(float64(loss)) {
			t.Fatalf("batch %v: loss %g, error %v", shape, loss, err)
		}
		g.Backward(1)
		if got := g.Logits().Shape; !sameShape(got, []int{shape[0], shape[1], tinyGPT.Vocab}) {
			t.Errorf("batch %v: logits of shape %v", shape, got)
		}
	}
}

func TestGPTCausal(t *testing.T) {
	g := newTinyGPT(t, tinyGPT, 1)
	perturb(g.Store(), 3, 0.2)
	const n, T = 2, 6
	b := tinyBatch(tinyGPT, n, T)
	if _, err := g.Forward(b, false); err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), g.Logits().Data...)
	b.Tokens[3] = (b.Tokens[3] + 1) % int32(tinyGPT.Vocab) // sequence 0, position 3
	if _, err := g.Forward(b, false); err != nil {
		t.Fatal(err)
	}
	V := tinyGPT.Vocab
	for row := 0; row < n*T; row++ {
		changed := false
		for i := row * V; i < (row+1)*V; i++ {
			changed = changed || math.Abs(float64(g.Logits().Data[i]-want[i])) > 1e-6
		}
		if wantChanged := row/T == 0 && row%T >= 3; changed != wantChanged {
			t.Errorf("sequence %d position %d: logits changed %v, want %v", row/T, row%T, changed, wantChanged)
		}
	}
}

func TestGPTDropoutStream(t *testing.T) {
	cfg := tinyGPT
	cfg.Dropout = 0.3
	g := newTinyGPT(t, cfg, 1)
	b := tinyBatch(cfg, 2, 6)
	forward := func(train bool) float32 {
		loss, err := g.Forward(b, train)
		if err != nil {
			t.Fatal(err)
		}
		return loss
	}
	eval := forward(false)
	if again := forward(false); again != eval {
		t.Errorf("evaluation loss %g, then %g", eval, again)
	}
	state, _ := g.DropoutStream().MarshalBinary()
	first, second := forward(true), forward(true)
	if first == eval || first == second {
		t.Errorf("training losses %g, %g and evaluation loss %g: want dropout to change each", first, second, eval)
	}
	resumed := NewStream(0, "other", 0)
	resumed.UnmarshalBinary(state)
	g.SetDropoutStream(resumed)
	if got := forward(true); got != first {
		t.Errorf("loss from the restored stream %g, want %g", got, first)
	}
	g.SetDropoutStream(NewStream(1, "dropout", 1))
	if got := forward(true); got == first {
		t.Errorf("another rank's stream gives the same loss %g", got)
	}
}

func TestGPTTrains(t *testing.T) {
	cfg := GPTConfig{Vocab: 7, Context: 8, Layers: 1, Heads: 2, Dim: 16}
	g := newTinyGPT(t, cfg, 1)
	// Windows of the repeating sequence 0 1 2 ... 6 0 1 ... at four offsets.
	b := &Batch{N: 4, T: 8, Tokens: make([]int32, 32), Y: make([]int32, 32)}
	for s := 0; s < 4; s++ {
		for i := 0; i < 8; i++ {
			b.Tokens[s*8+i] = int32((2*s + i) % 7)
			b.Y[s*8+i] = int32((2*s + i + 1) % 7)
		}
	}
	st := g.Store()
	cfgA := DefaultAdamW()
	cfgA.LR = 1e-2
	opt, err := NewAdamW(cfgA, st.Params, 0, len(st.W))
	if err != nil {
		t.Fatal(err)
	}
	var first, last float32
	for step := 0; step < 40; step++ {
		st.ZeroGrads()
		loss, err := g.Forward(b, true)
		if err != nil {
			t.Fatal(err)
		}
		g.Backward(1)
		opt.Step(st.W, st.G)
		if step == 0 {
			first = loss
		}
		last = loss
	}
	if !(last < first/4) {
		t.Errorf("loss %g after 40 steps from %g: want under a quarter of it", last, first)
	}
	t.Logf("loss %.4f -> %.4f", first, last)
}
