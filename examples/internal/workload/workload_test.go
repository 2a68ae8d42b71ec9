package workload

import (
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
		{func(c *Config) { c.Batch = 10 }, 3, "--batch 10 does not split into 3 ranks x 1 micro-batches: pass a multiple of 3"},
		{func(c *Config) { c.Batch, c.Accum = 12, 5 }, 2, "pass a multiple of 10"},
		{func(c *Config) { c.Accum = 0 }, 1, "--accum 0"},
		{func(c *Config) { c.LR = 0 }, 1, "--lr 0"},
		{func(c *Config) { c.Steps = -1 }, 1, "--steps -1"},
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
