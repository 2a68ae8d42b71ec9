package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// small builds a workload of a small model: mlp, or a gpt on a tiny text.
func small(t *testing.T, edit func(*Config)) *Workload {
	t.Helper()
	c := DefaultConfig()
	c.Examples, c.Hidden = 64, "16, 8"
	c.Data = filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(c.Data, []byte(strings.Repeat("abcdefgh ", 120)), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Context, c.Dim, c.Heads = 8, 16, 2
	edit(&c)
	w, err := New(c, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestCheckSaved: a checkpoint of another model, shape or optimizer is an
// error saying which flags to pass; another seed, batch, rate or data a
// notice.
func TestCheckSaved(t *testing.T) {
	same := func(*Config) {}
	mlp := small(t, same).CheckpointMeta()
	gpt := small(t, func(c *Config) { c.Model, c.Optim = "gpt", "adamw" }).CheckpointMeta()
	if mlp["hidden"] != "16,8" || mlp["shape"] != "784-16-8-10" || gpt["shape"] != "2 layers, 2 heads, dim 16, context 8, vocab 9" ||
		mlp["examples"] != "64" || gpt["data"] == "" || gpt["max-bytes"] != "4194304" {
		t.Errorf("saved %v and %v", mlp, gpt)
	}
	cases := []struct {
		name   string
		saved  map[string]string
		run    func(*Config)
		err    string
		notice string
	}{
		{"same", mlp, same, "", ""},
		{"before flags were saved", map[string]string{}, func(c *Config) { c.Model = "gpt" }, "", ""},
		{"gpt into mlp", gpt, same,
			"it holds a gpt model (2 layers, 2 heads, dim 16, context 8, vocab 9); this run builds mlp (784-16-8-10): pass --model gpt, or another --ckpt", ""},
		{"gpt into mlp of other gpt flags", gpt, func(c *Config) { c.Dim, c.Layers = 32, 3 },
			"pass --model gpt --layers 2 --dim 16, or another --ckpt", ""},
		{"mlp into gpt", mlp, func(c *Config) { c.Model = "gpt" },
			"it holds an mlp model (784-16-8-10); this run builds gpt (2 layers, 2 heads, dim 16, context 8, vocab 9): pass --model mlp, or another --ckpt", ""},
		{"other hidden", mlp, func(c *Config) { c.Hidden = "16" }, "pass --hidden 16,8, or another --ckpt", ""},
		// Go's source, the default --data, has another vocabulary.
		{"other vocab", gpt, func(c *Config) { c.Model, c.Data, c.MaxBytes = "gpt", "", 1<<12 }, "pass --data " + gpt["data"] + " --max-bytes 4194304, the data it was trained on", ""},
		{"other vocab, data not recorded", map[string]string{"model": "gpt", "shape": gpt["shape"]}, func(c *Config) { c.Model, c.Data, c.MaxBytes = "gpt", "", 1<<12 }, "pass the --data it was trained on", ""},
		{"other examples", mlp, func(c *Config) { c.Examples = 128 }, "",
			"note: the checkpoint in ck was saved by a run with --examples 64; this one goes on with --examples 128"},
		{"less text, same vocabulary", gpt, func(c *Config) { c.Model, c.Optim, c.Data, c.MaxBytes = "gpt", "adamw", gpt["data"], 600 }, "",
			"note: the checkpoint in ck was saved by a run with --max-bytes 4194304; this one goes on with --max-bytes 600"},
		{"old zero index", map[string]string{"model": "gpt"}, same, "it holds a gpt model; this run builds mlp (784-16-8-10): pass --model gpt, or another --ckpt", ""},
		{"other optimizer", mlp, func(c *Config) { c.Optim = "adamw" }, "it was saved with sgd; this run uses adamw: pass --optim sgd, or another --ckpt", ""},
		{"other seed, batch and rate", mlp, func(c *Config) { c.Seed, c.Batch, c.LR = 7, 32, 0.01 }, "",
			"note: the checkpoint in ck was saved by a run with --seed 1 --batch 64 --lr 0.05; this one goes on with --seed 7 --batch 32 --lr 0.01"},
	}
	for _, tc := range cases {
		notice, err := small(t, tc.run).CheckSaved("ck", tc.saved)
		switch {
		case tc.err == "" && err != nil, tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		case notice != tc.notice:
			t.Errorf("%s: notice %q, want %q", tc.name, notice, tc.notice)
		}
	}
}

// TestForeignCheckpoint: a directory with the other program's checkpoint
// says which program resumes it.
func TestForeignCheckpoint(t *testing.T) {
	ddp, zero, empty := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ddp, CheckpointFile), nil, 0o644)
	os.WriteFile(filepath.Join(zero, shardckpt.IndexFile), nil, 0o644)
	if err := ForeignCheckpoint(ddp, true); err == nil || !strings.Contains(err.Error(), ddp+" holds a ddp (single-file) checkpoint") || !strings.Contains(err.Error(), "resume it with examples/ddp") {
		t.Errorf("zero on a ddp directory: %v", err)
	}
	if err := ForeignCheckpoint(zero, false); err == nil || !strings.Contains(err.Error(), zero+" holds a sharded checkpoint") || !strings.Contains(err.Error(), "resume it with examples/zero") {
		t.Errorf("ddp on a zero directory: %v", err)
	}
	for _, sharded := range []bool{false, true} {
		if err := ForeignCheckpoint(empty, sharded); err != nil {
			t.Errorf("an empty directory, sharded %v: %v", sharded, err)
		}
	}
}
