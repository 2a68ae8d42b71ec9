package workload

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestValidate: each bad flag value is an error naming the flag and what
// to pass.
func TestValidate(t *testing.T) {
	cases := []struct {
		edit     func(*Config)
		replicas int
		want     string
	}{
		{func(c *Config) { c.Model = "cnn" }, 1, `--model "cnn": want mlp or gpt`},
		{func(c *Config) { c.Optim = "lamb" }, 1, `--optim "lamb"`},
		{func(c *Config) { c.Batch = 10 }, 3, "--batch 10 does not split into 3 ranks x 1 micro-batch: pass a multiple of 3"},
		{func(c *Config) { c.Batch = -2 }, 2, "--batch -2: want 1 or more, or 0 (the default)"},
		{func(c *Config) { c.Batch, c.Accum = 12, 5 }, 2, "pass a multiple of 10"},
		{func(c *Config) { c.Accum = 0 }, 1, "--accum 0"},
		{func(c *Config) { c.LR = 0 }, 1, "--lr 0"},
		{func(c *Config) { c.LR = math.NaN() }, 1, "--lr NaN: want a positive rate"},
		{func(c *Config) { c.LR = math.Inf(1) }, 1, "--lr +Inf: want a positive rate that float32"},
		{func(c *Config) { c.LR = 1e308 }, 1, "--lr 1e+308: want a positive rate that float32, the model's type, holds"},
		{func(c *Config) { c.LR = 1e-50 }, 1, "--lr 1e-50: want a positive rate that float32"},
		{func(c *Config) { c.Momentum = math.Inf(1) }, 1, "--momentum +Inf: want a finite momentum"},
		{func(c *Config) { c.Momentum = 1e39 }, 1, "--momentum 1e+39: want a finite momentum"},
		{func(c *Config) { c.Steps = -1 }, 1, "--steps -1"},
		{func(c *Config) { c.Steps = 0 }, 1, "--steps 0: want 1 or more"},
		{func(c *Config) { c.Momentum = -1 }, 1, "--momentum -1: want 0 (none) or more"},
		{func(c *Config) { c.Hidden = "10,x" }, 1, `--hidden "10,x"`},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		c.Examples = 64
		tc.edit(&c)
		_, err := New(c, 0, tc.replicas)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", c, err, tc.want)
		}
	}
}

// TestCheckBatch: the messages call the data-parallel ranks what the
// program calls them.
func TestCheckBatch(t *testing.T) {
	c := DefaultConfig()
	c.Batch = 64
	err := c.CheckBatch(3, "worker")
	if want := "--batch 64 does not split into 3 workers x 1 micro-batch: pass a multiple of 3"; err == nil || err.Error() != want {
		t.Errorf("%v, want %q", err, want)
	}
}

// TestDefaultBatch: the default batch splits at any number of ranks and
// micro-batches, DefaultBatch or the largest multiple below it (one if
// none is).
func TestDefaultBatch(t *testing.T) {
	for _, tc := range []struct{ replicas, accum, want int }{
		{1, 1, 64}, {2, 1, 64}, {3, 1, 63}, {3, 2, 60}, {5, 4, 60}, {100, 1, 100},
	} {
		c := DefaultConfig()
		c.Accum = tc.accum
		if got := c.GlobalBatch(tc.replicas); got != tc.want {
			t.Errorf("%d ranks x %d micro-batches: batch %d, want %d", tc.replicas, tc.accum, got, tc.want)
		}
		if err := c.Validate(tc.replicas); err != nil {
			t.Errorf("%d ranks x %d micro-batches: %v", tc.replicas, tc.accum, err)
		}
	}
	c := DefaultConfig()
	c.Batch = 64
	if got := c.GlobalBatch(3); got != 64 {
		t.Errorf("--batch 64 at 3 ranks: %d, want it as given", got)
	}
}

// TestBatchNote: a default batch that had to grow past DefaultBatch to
// give every rank's micro-batch a sample says so; one rounded down, as
// the help says, or one given, says nothing.
func TestBatchNote(t *testing.T) {
	for _, tc := range []struct {
		batch, replicas, accum int
		rank, want             string
	}{
		{0, 4, 32, "rank", "note: the default batch of 64 does not split into 4 ranks x 32 micro-batches: training with batch 128, one a micro-batch (pass --batch to choose)"},
		{0, 100, 1, "worker", "note: the default batch of 64 does not split into 100 workers x 1 micro-batch: training with batch 100"},
		{0, 3, 2, "rank", ""},
		{0, 64, 1, "rank", ""},
		{256, 4, 32, "rank", ""},
	} {
		c := DefaultConfig()
		c.Batch, c.Accum = tc.batch, tc.accum
		got := c.BatchNote(tc.replicas, tc.rank)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("--batch %d, %d %ss x --accum %d: %q, want %q", tc.batch, tc.replicas, tc.rank, tc.accum, got, tc.want)
		}
	}
}

// TestMessage: each line of a joined error says the program's name once.
func TestMessage(t *testing.T) {
	err := errors.Join(errors.New("hybrid: a"), errors.New("gpt: b"))
	if got, want := message("gpt", err), "gpt: hybrid: a\ngpt: b"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestBatches: the MLP workload's micro-batches hold the rank's slice of
// the global batch, each of batch/(replicas·accum) rows.
func TestBatches(t *testing.T) {
	c := DefaultConfig()
	c.Examples, c.Batch, c.Accum, c.Hidden = 64, 16, 2, "8"
	w, err := New(c, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := w.Batches(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs[0].N != 4 || bs[1].N != 4 || len(bs[0].X) != 4*mlpInputs {
		t.Fatalf("micro-batches %d of %d rows, want 2 of 4", len(bs), bs[0].N)
	}
}
