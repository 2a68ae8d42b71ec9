package nn

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// trained returns an MLP and AdamW after two steps on a fixed batch.
func trained(t *testing.T, seed uint64, sizes ...int) (*Sequential, *AdamW) {
	t.Helper()
	m := NewMLP(seed, sizes...)
	st := m.Store()
	opt, err := NewAdamW(DefaultAdamW(), st.Params, 0, len(st.W))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 4*sizes[0])
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	b := &Batch{N: 4, X: x, XDim: sizes[0], Y: []int32{0, 1, 2, 1}}
	for range 2 {
		st.ZeroGrads()
		if _, err := m.Forward(b, true); err != nil {
			t.Fatal(err)
		}
		m.Backward(1)
		opt.Step(st.W, st.G)
	}
	return m, opt
}

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	m, opt := trained(t, 1, 6, 8, 3)
	s := NewStream(1, "dropout", 0)
	s.Uint64()
	save := &Checkpoint{Store: m.Store(), Optimizer: opt, Streams: map[string]*Stream{"dropout": s}, Step: 2, Meta: map[string]string{"model": "mlp"}}
	if err := save.Save(path); err != nil {
		t.Fatal(err)
	}
	m2, opt2 := trained(t, 9, 6, 8, 3) // other values, same layout
	s2 := NewStream(5, "other", 3)
	load := &Checkpoint{Store: m2.Store(), Optimizer: opt2, Streams: map[string]*Stream{"dropout": s2}}
	if err := load.Load(path); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Store().W, m2.Store().W) {
		t.Error("parameters differ after the round trip")
	}
	for i, st := range opt.State() {
		st2 := opt2.State()[i]
		if !slices.Equal(st.F32, st2.F32) || !slices.Equal(st.I64, st2.I64) {
			t.Errorf("optimizer state %s differs after the round trip", st.Name)
		}
	}
	if !load.Verified {
		t.Error("Load did not verify the checksum Save wrote")
	}
	if load.Step != 2 || load.Meta["model"] != "mlp" {
		t.Errorf("step %d meta %v, want 2 and model=mlp", load.Step, load.Meta)
	}
	if a, b := s.Uint64(), s2.Uint64(); a != b {
		t.Errorf("the restored stream draws %d, the saved one %d", b, a)
	}
	// Python's tools see ordinary named tensors.
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fc1.weight", "fc2.bias", "optim.exp_avg.fc1.weight", "optim.exp_avg_sq.fc2.bias", "optim.step"} {
		if _, ok := f.Tensor(name); !ok {
			t.Errorf("no tensor %s in the file", name)
		}
	}
}

func TestCheckpointRejects(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	m, opt := trained(t, 1, 6, 8, 3)
	if err := (&Checkpoint{Store: m.Store(), Optimizer: opt}).Save(path); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	other, otherOpt := trained(t, 1, 6, 9, 3)
	flip := func(at int) []byte {
		b := slices.Clone(good)
		b[at] ^= 0x10
		return b
	}
	step := bytes.Index(good, []byte(`"step":"0"`)) + len(`"step":"`)
	if step < len(`"step":"`) {
		t.Fatal(`no "step":"0" in the header`)
	}
	cases := []struct {
		name    string
		content []byte
		into    *Checkpoint
		want    string
		kind    error
	}{
		{"other shape", good, &Checkpoint{Store: other.Store(), Optimizer: otherOpt}, "fc1.weight", ErrCheckpoint},
		{"truncated", good[:len(good)-5], &Checkpoint{Store: m.Store(), Optimizer: opt}, "corrupt checkpoint file: safetensors: truncated", ErrCorrupt},
		{"flipped data", flip(len(good) - 1), &Checkpoint{Store: m.Store(), Optimizer: opt}, "corrupt checkpoint file: sha256 ", ErrCorrupt},
		{"flipped metadata", flip(step), &Checkpoint{Store: m.Store(), Optimizer: opt}, "corrupt checkpoint file: sha256 ", ErrCorrupt},
		{"not a checkpoint", plainFile(t), &Checkpoint{Store: m.Store()}, "not a gorun checkpoint", ErrCheckpoint},
	}
	for _, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(p, c.content, 0o644); err != nil {
			t.Fatal(err)
		}
		err := c.into.Load(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", c.name, err, p, c.want)
		}
		if !errors.Is(err, c.kind) {
			t.Errorf("%s: %v does not wrap %v", c.name, err, c.kind)
		}
	}
}

// TestCheckpointWithoutSum: a file saved before checkpoints carried a
// sha256 still loads, unverified.
func TestCheckpointWithoutSum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	m, opt := trained(t, 1, 6, 8, 3)
	if err := (&Checkpoint{Store: m.Store(), Optimizer: opt, Step: 2}).Save(path); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Metadata[sumKey]; !ok {
		t.Fatalf("no %q in the metadata %v", sumKey, f.Metadata)
	}
	delete(f.Metadata, sumKey)
	if err := safetensors.WriteFile(path, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}
	m2, opt2 := trained(t, 9, 6, 8, 3)
	load := &Checkpoint{Store: m2.Store(), Optimizer: opt2}
	if err := load.Load(path); err != nil {
		t.Fatalf("a checkpoint without a checksum: %v", err)
	}
	if load.Verified || load.Step != 2 || !slices.Equal(m.Store().W, m2.Store().W) {
		t.Errorf("Verified %v step %d, parameters equal %v: want false, 2, true", load.Verified, load.Step, slices.Equal(m.Store().W, m2.Store().W))
	}
}

// plainFile is a valid safetensors file that no gorun job wrote.
func plainFile(t *testing.T) []byte {
	var b strings.Builder
	if err := safetensors.Encode(&b, []safetensors.Tensor{safetensors.F32("x", []int{2}, []float32{1, 2})}, nil); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// TestCheckpointOtherModelOrOptimizer: a checkpoint of another model, or
// saved with another optimizer, is refused saying so, and Check's error
// comes before anything is read.
func TestCheckpointOtherModelOrOptimizer(t *testing.T) {
	dir := t.TempDir()
	m, adam := trained(t, 1, 6, 8, 3)
	st := m.Store()
	sgd, err := NewSGD(SGDConfig{LR: 0.1, Momentum: 0.9}, st.Params, 0, len(st.W))
	if err != nil {
		t.Fatal(err)
	}
	gpt, err := NewGPT(GPTConfig{Vocab: 5, Context: 4, Layers: 1, Heads: 1, Dim: 4}, 1)
	if err != nil {
		t.Fatal(err)
	}
	withSGD, withGPT := filepath.Join(dir, "sgd"), filepath.Join(dir, "gpt")
	if err := (&Checkpoint{Store: st, Optimizer: sgd}).Save(withSGD); err != nil {
		t.Fatal(err)
	}
	if err := (&Checkpoint{Store: gpt.Store()}).Save(withGPT); err != nil {
		t.Fatal(err)
	}
	// A checkpoint from before the optimizer's name was saved.
	old := filepath.Join(dir, "old")
	f, err := safetensors.ReadFile(withSGD)
	if err != nil {
		t.Fatal(err)
	}
	delete(f.Metadata, "optimizer")
	delete(f.Metadata, sumKey)
	if err := safetensors.WriteFile(old, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}
	errFlags := errors.New("pass --flags")
	cases := []struct {
		name, path string
		into       *Checkpoint
		want       string
	}{
		{"other optimizer", withSGD, &Checkpoint{Store: st, Optimizer: adam}, "it was saved with optimizer sgd, and this one is adamw"},
		{"other optimizer, old file", old, &Checkpoint{Store: st, Optimizer: adam}, "no optimizer state optim.exp_avg.fc1.weight: it was saved with another optimizer, or none"},
		{"other model", withGPT, &Checkpoint{Store: st}, "no tensor fc1.weight: it holds another model (tensors wte.weight, wpe.weight, h.0.ln_1.weight, ...)"},
		{"check", withGPT, &Checkpoint{Store: st, Check: func(map[string]string) error { return errFlags }}, "checkpoint does not match: pass --flags"},
	}
	for _, c := range cases {
		err := c.into.Load(c.path)
		if err == nil || !strings.Contains(err.Error(), c.path+": ") || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: %v, want an error naming %s, saying %q and wrapping ErrCheckpoint", c.name, err, c.path, c.want)
		}
	}
}

// TestCheckpointBlobs: the program's byte strings come back under their
// names, an empty one included, inside the sha256 (one flipped byte is
// ErrCorrupt); a file saved without them loads with none; a blob with a
// parameter's name is refused.
func TestCheckpointBlobs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	m, opt := trained(t, 1, 6, 8, 3)
	blobs := map[string][]byte{"compress.rank0": []byte("state of rank 0"), "compress.rank1": {}}
	if err := (&Checkpoint{Store: m.Store(), Optimizer: opt, Blobs: blobs}).Save(path); err != nil {
		t.Fatal(err)
	}
	load := &Checkpoint{Store: m.Store(), Optimizer: opt}
	if err := load.Load(path); err != nil {
		t.Fatal(err)
	}
	if len(load.Blobs) != 2 || string(load.Blobs["compress.rank0"]) != "state of rank 0" || load.Blobs["compress.rank1"] == nil {
		t.Errorf("Blobs after the round trip: %q", load.Blobs)
	}
	data, _ := os.ReadFile(path)
	i := bytes.Index(data, []byte("state of rank 0"))
	data[i] ^= 1
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := load.Load(path); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a flipped byte in a blob: %v, want ErrCorrupt", err)
	}
	if err := (&Checkpoint{Store: m.Store(), Optimizer: opt}).Save(path); err != nil {
		t.Fatal(err)
	}
	if err := load.Load(path); err != nil || load.Blobs == nil || len(load.Blobs) != 0 {
		t.Errorf("a file without blobs: %v, Blobs %q, want an empty map", err, load.Blobs)
	}
	name := m.Store().Params[0].Name
	if err := (&Checkpoint{Store: m.Store(), Blobs: map[string][]byte{name: nil}}).Save(path); err == nil || !strings.Contains(err.Error(), name) {
		t.Errorf("a blob named %s: %v, want a refusal", name, err)
	}
}
