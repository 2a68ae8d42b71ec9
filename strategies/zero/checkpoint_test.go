package zero_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

// segment trains steps [from, to) with a driver of cfg on c, loading dir
// first when load is set and saving to it at the end when save is set.
func segment(ctx context.Context, t testing.TB, c *spmd.Comm, cfg zero.Config, dir string, load, save bool, from, to int) (run, error) {
	cfg.Optimizer = adamw
	z, err := zero.New(ctx, c, newMLP(), cfg)
	if err != nil {
		return run{}, err
	}
	defer z.Close()
	if load {
		step, err := z.Load(ctx, dir)
		if err != nil {
			return run{}, err
		}
		if step != from {
			return run{}, fmt.Errorf("loaded step %d, want %d", step, from)
		}
	}
	s, err := data.NewSampler(examples, globalBatch, c.Rank(), c.Size(), seed, true)
	if err != nil {
		return run{}, err
	}
	var r run
	for step := from; step < to; step++ {
		loss, err := z.Step(ctx, batches(t, s, step, 1))
		if err == nil {
			loss, err = z.MeanLoss(ctx, loss)
		}
		if err != nil {
			return run{}, err
		}
		r.losses = append(r.losses, loss)
	}
	if save {
		if err := z.Save(ctx, dir, to, map[string]string{"test": "yes"}); err != nil {
			return run{}, err
		}
	}
	r.params, err = z.Params(ctx)
	return r, err
}

// TestCheckpointReshards: a stage 3 checkpoint saved at 4 ranks loads at
// 3, 2 and 1 ranks, and at other stages and in mixed precision, and
// training goes on as if uninterrupted (DDP's 20 steps, within 1e-5).
func TestCheckpointReshards(t *testing.T) {
	want := onRank0(t, spmdtest.Mem, 4, func(ctx context.Context, c *spmd.Comm) (run, error) { return ddp(ctx, t, c) })
	dir := t.TempDir()
	first := onRank0(t, spmdtest.Mem, 4, func(ctx context.Context, c *spmd.Comm) (run, error) {
		return segment(ctx, t, c, zero.Config{Stage: 3}, dir, false, true, 0, 10)
	})
	if t.Failed() {
		return
	}
	for _, tc := range []struct {
		n   int
		cfg zero.Config
	}{{3, zero.Config{Stage: 2}}, {2, zero.Config{Stage: 1}}, {1, zero.Config{Stage: 0}}, {4, zero.Config{Stage: 3}}, {2, zero.Config{Stage: 3, Hybrid: true}}} {
		label := fmt.Sprintf("np=%d/%s", tc.n, tc.cfg)
		t.Run(label, func(t *testing.T) {
			rest := onRank0(t, spmdtest.Mem, tc.n, func(ctx context.Context, c *spmd.Comm) (run, error) {
				return segment(ctx, t, c, tc.cfg, dir, true, false, 10, 20)
			})
			if !t.Failed() {
				same(t, label, run{losses: append(append([]float32(nil), first.losses...), rest.losses...), params: rest.params}, want, 1e-5)
			}
		})
	}
	// Into one process, without a driver.
	m := newMLP()
	meta, err := zero.LoadModel(dir, m.Store())
	if err != nil {
		t.Fatal(err)
	}
	if meta["step"] != "10" || meta["test"] != "yes" {
		t.Errorf("metadata %v, want step 10 and the caller's test=yes", meta)
	}
	if !equal(m.Store().W, first.params) {
		t.Errorf("LoadModel's parameters differ from the saved ones")
	}
}

func equal(a, b []float32) bool {
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

// TestCheckpointCrashAndDamage: shards written by a save that never
// committed (the job killed between shard writes) leave the previous
// checkpoint loadable; a missing or corrupt shard is an error naming it,
// on every rank.
func TestCheckpointCrashAndDamage(t *testing.T) {
	dir := t.TempDir()
	onRank0(t, spmdtest.Mem, 2, func(ctx context.Context, c *spmd.Comm) (run, error) {
		return segment(ctx, t, c, zero.Config{Stage: 2}, dir, false, true, 0, 4)
	})
	// A later save at 4 ranks of which only two shards were written.
	for r := range 2 {
		if _, err := shardckpt.WriteShard(dir, "step8-crashed", r, 4, []shardckpt.Piece{{Tensor: "fc1.bias", Shape: []int{32}, Lo: 8 * r, Hi: 8*r + 8, Data: make([]float32, 8)}}); err != nil {
			t.Fatal(err)
		}
	}
	onRank0(t, spmdtest.Mem, 3, func(ctx context.Context, c *spmd.Comm) (run, error) {
		return segment(ctx, t, c, zero.Config{Stage: 3}, dir, true, false, 4, 5)
	})
	shards, _ := filepath.Glob(filepath.Join(dir, "shard-*-of-00002.*.safetensors"))
	if len(shards) != 2 {
		t.Fatalf("shards %v, want the 2 of the committed save", shards)
	}
	for _, tc := range []struct {
		name   string
		damage func(path string) error
		is     error
	}{
		{"missing", os.Remove, fs.ErrNotExist},
		{"corrupt", func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b[len(b)-3] ^= 0x40
			return os.WriteFile(path, b, 0o644)
		}, shardckpt.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(d, filepath.Base(shards[1]))
			if err := tc.damage(victim); err != nil {
				t.Fatal(err)
			}
			errs := make([]error, 2)
			j := spmdtest.NewJob(t, spmdtest.Mem, 2)
			defer j.Close()
			done := make(chan struct{}, 2)
			for r, w := range j.Worlds {
				go func() {
					defer func() { done <- struct{}{} }()
					z, err := zero.New(context.Background(), w.Comm, newMLP(), zero.Config{Stage: 1, Optimizer: adamw})
					if err != nil {
						errs[r] = err
						return
					}
					defer z.Close()
					_, errs[r] = z.Load(context.Background(), d)
				}()
			}
			<-done
			<-done
			base := filepath.Base(victim)
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "loading the checkpoint") && !strings.Contains(err.Error(), base) {
					t.Errorf("rank %d: %v, want an error naming %s", r, err, base)
				}
			}
			// Rank 1 reads the second shard; rank 0 may need it too.
			if !errors.Is(errs[1], tc.is) || !strings.Contains(errs[1].Error(), base) {
				t.Errorf("rank 1: %v, want %v naming %s", errs[1], tc.is, base)
			}
		})
	}
}
