package hybrid_test

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// trainFrom runs steps [from, to) of cfg on n ranks, loading dir's
// checkpoint first when from > 0 and saving one after step to when save
// is set, and returns rank 0's losses and parameters.
func trainFrom(t *testing.T, n int, cfg hybrid.Config, dir string, from, to int, save bool) run {
	return trainCodec(t, n, cfg, "", false, dir, from, to, save)
}

// trainCodec is trainFrom with each rank's own codec parsed from spec
// (when not ""); strip sets the codecs' state back to a fresh codec's
// after the load.
func trainCodec(t *testing.T, n int, cfg hybrid.Config, spec string, strip bool, dir string, from, to int, save bool) run {
	t.Helper()
	var mu sync.Mutex
	var out run
	spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
		cfg := cfg
		if spec != "" {
			var err error
			if cfg.Compress, err = compress.Parse(spec, testSeed); err != nil {
				return err
			}
		}
		e, err := hybrid.New(ctx, w.Comm, cfg)
		if err != nil {
			return err
		}
		defer e.Close()
		if from > 0 {
			step, err := e.Load(ctx, dir)
			if err != nil {
				return err
			}
			if step != from {
				return fmt.Errorf("loaded step %d, want %d", step, from)
			}
		}
		if strip {
			fresh, err := compress.Parse(spec, testSeed)
			if err != nil {
				return err
			}
			b, err := fresh.(encoding.BinaryMarshaler).MarshalBinary()
			if err != nil {
				return err
			}
			if err := cfg.Compress.(encoding.BinaryUnmarshaler).UnmarshalBinary(b); err != nil {
				return err
			}
		}
		var losses []float32
		for step := from; step < to; step++ {
			b := replica(batch(step, testModel.Context), e.Mesh().D, e.Mesh().DP)
			loss, err := e.Step(ctx, b)
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			losses = append(losses, loss)
		}
		if save {
			if err := e.Save(ctx, dir, to, map[string]string{"who": "test"}); err != nil {
				return err
			}
		}
		params, err := e.Params(ctx)
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			mu.Lock()
			out = run{losses: losses, params: params}
			mu.Unlock()
		}
		return nil
	})
	return out
}

// TestResumeExact: 4 steps, a save, and a resumed engine's 4 more give
// the losses and parameters of 8 steps straight, bit for bit, with
// dropout on, on meshes that cover every driver: ZeRO (every stage),
// DDP with a codec, and the pipeline's sync at ZeRO 0 and 1; and with
// codecs that keep state (topk, powersgd) on the DDP path, the
// pipeline's sync and ZeRO, whose state the checkpoint carries: the
// resumed run with that state set back to a fresh codec's goes otherwise.
func TestResumeExact(t *testing.T) {
	model := testModel
	model.Dropout = 0.1
	cases := []struct {
		name                   string
		tp, pp, dp, zero, virt int
		compress               bool
		codec                  string // each rank's own, compress.Parse
	}{
		{name: "1x1x1", tp: 1, pp: 1, dp: 1},
		{name: "2x1x2-zero1", tp: 2, pp: 1, dp: 2, zero: 1},
		{name: "1x1x2-zero3", tp: 1, pp: 1, dp: 2, zero: 3},
		{name: "1x1x2-compressed", tp: 1, pp: 1, dp: 2, compress: true},
		{name: "2x2x1", tp: 2, pp: 2, dp: 1},
		{name: "1x2x2-zero1-interleaved", tp: 1, pp: 2, dp: 2, zero: 1, virt: 2},
		{name: "1x1x2-topk", tp: 1, pp: 1, dp: 2, codec: "topk:0.1"},
		{name: "1x1x2-powersgd", tp: 1, pp: 1, dp: 2, codec: "powersgd:2"},
		{name: "1x2x2-topk", tp: 1, pp: 2, dp: 2, codec: "topk:0.1"},
		{name: "1x2x2-zero1-powersgd", tp: 1, pp: 2, dp: 2, zero: 1, codec: "powersgd:2"},
		{name: "1x1x2-zero1-topk", tp: 1, pp: 1, dp: 2, zero: 1, codec: "topk:0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := hybrid.Config{Model: model, TP: tc.tp, PP: tc.pp, DP: tc.dp, Zero: tc.zero, Micro: 2,
				Virtual: tc.virt, Seed: testSeed, Optimizer: adamw}
			if tc.virt > 1 {
				cfg.Schedule = "interleaved"
			}
			if tc.compress {
				cfg.Compress = exactCodec{}
			}
			n := tc.tp * tc.pp * tc.dp
			want := trainCodec(t, n, cfg, tc.codec, false, "", 0, 8, false)
			dir := t.TempDir()
			trainCodec(t, n, cfg, tc.codec, false, dir, 0, 4, true)
			got := trainCodec(t, n, cfg, tc.codec, false, dir, 4, 8, false)
			if t.Failed() {
				return
			}
			if !slices.Equal(got.losses, want.losses[4:]) {
				t.Errorf("resumed losses %v, straight %v", got.losses, want.losses[4:])
			}
			if !slices.Equal(got.params, want.params) {
				closeTo(t, "parameters after 8 steps", got.params, want.params, 0)
			}
			if tc.codec == "" {
				return
			}
			stripped := trainCodec(t, n, cfg, tc.codec, true, dir, 4, 8, false)
			if !t.Failed() && slices.Equal(stripped.params, want.params) {
				t.Errorf("resumed with the codec state stripped, the parameters are the straight run's: the state is not what makes the resume exact")
			}
		})
	}
}

// TestLoadRefusesAnotherMesh: a checkpoint saved on tp 2 does not load
// on dp 2, nor into another model, and says why.
func TestLoadRefusesAnotherMesh(t *testing.T) {
	dir := t.TempDir()
	cfg := hybrid.Config{Model: testModel, TP: 2, PP: 1, DP: 1, Micro: 1, Seed: testSeed, Optimizer: adamw}
	trainFrom(t, 2, cfg, dir, 0, 1, true)
	other := testModel
	other.Dim = 32
	for _, c := range []hybrid.Config{
		{Model: testModel, TP: 1, PP: 1, DP: 2, Micro: 1, Seed: testSeed, Optimizer: adamw},
		{Model: other, TP: 2, PP: 1, DP: 1, Micro: 1, Seed: testSeed, Optimizer: adamw},
	} {
		spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
			e, err := hybrid.New(ctx, w.Comm, c)
			if err != nil {
				return err
			}
			defer e.Close()
			_, err = e.Load(ctx, dir)
			if !errors.Is(err, nn.ErrCheckpoint) {
				return fmt.Errorf("loading a tp 2 checkpoint into %s (%s): %v, want nn.ErrCheckpoint", c.Layout(), hybrid.ModelString(c.Model), err)
			}
			return nil
		})
	}
}

// TestLoadRefusesAnotherCodec: a checkpoint that carries topk's state
// does not load into an engine of another codec, or of none, and names
// the --compress to pass; one without codec state loads into an engine
// with topk (its residuals at zero).
func TestLoadRefusesAnotherCodec(t *testing.T) {
	cfg := hybrid.Config{Model: testModel, TP: 1, PP: 1, DP: 2, Micro: 1, Seed: testSeed, Optimizer: adamw}
	dir := t.TempDir()
	trainCodec(t, 2, cfg, "topk:0.1", false, dir, 0, 1, true)
	for _, spec := range []string{"powersgd:2", "fp16", ""} {
		spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
			cfg := cfg
			cfg.Compress, _ = compress.Parse(spec, testSeed)
			e, err := hybrid.New(ctx, w.Comm, cfg)
			if err != nil {
				return err
			}
			defer e.Close()
			_, err = e.Load(ctx, dir)
			if !errors.Is(err, nn.ErrCheckpoint) || !strings.Contains(fmt.Sprint(err), "resume with --compress topk:0.1") {
				return fmt.Errorf("loading topk's checkpoint with --compress %q: %v, want nn.ErrCheckpoint naming --compress topk:0.1", spec, err)
			}
			return nil
		})
	}
	plain := t.TempDir()
	trainFrom(t, 2, cfg, plain, 0, 1, true)
	trainCodec(t, 2, cfg, "topk:0.1", false, plain, 1, 2, false)
}

// TestCodecOneReplica: with one data-parallel replica a codec has nothing
// to do on any gradient path (DDP's hook under tensor parallelism, the
// pipeline's sync, ZeRO): the engine trains exactly as without it, moves
// no bytes, and its checkpoint carries no codec state.
func TestCodecOneReplica(t *testing.T) {
	for _, tc := range []struct {
		name                string
		tp, pp, zero, micro int
	}{
		{"tp2", 2, 1, 0, 1},
		{"pp2", 1, 2, 0, 2},
		{"tp2-pp2", 2, 2, 1, 2},
		{"zero1", 1, 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := hybrid.Config{Model: testModel, TP: tc.tp, PP: tc.pp, DP: 1, Zero: tc.zero, Micro: tc.micro, Seed: testSeed, Optimizer: adamw}
			n := tc.tp * tc.pp
			want := trainFrom(t, n, cfg, "", 0, 3, false)
			dir := t.TempDir()
			var stats compress.Stats
			var active bool
			var mu sync.Mutex
			spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
				cfg := cfg
				cfg.Compress, _ = compress.Parse("topk:0.01", testSeed)
				e, err := hybrid.New(ctx, w.Comm, cfg)
				if err != nil {
					return err
				}
				defer e.Close()
				for step := range 3 {
					if _, err := e.Step(ctx, replica(batch(step, testModel.Context), 0, 1)); err != nil {
						return err
					}
				}
				if err := e.Save(ctx, dir, 3, nil); err != nil {
					return err
				}
				mu.Lock()
				stats.Add(e.Compression())
				active = active || e.CodecActive()
				mu.Unlock()
				return nil
			})
			if t.Failed() {
				return
			}
			if active || stats != (compress.Stats{}) {
				t.Errorf("CodecActive %v, Compression %+v: want an idle codec", active, stats)
			}
			got := trainFrom(t, n, cfg, dir, 3, 3, false)
			if !slices.Equal(got.params, want.params) {
				closeTo(t, "parameters after 3 steps through an idle codec", got.params, want.params, 0)
			}
			ix, err := shardckpt.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := ix.Meta()[hybrid.MetaCodec]; ok {
				t.Errorf("the checkpoint records codec state %q", v)
			}
		})
	}
}

// TestLoadMissingShardOnce: a shard file missing at a load fails it on
// every rank, and a rank that reads it names the file once, not once for
// each tensor it holds.
func TestLoadMissingShardOnce(t *testing.T) {
	cfg := hybrid.Config{Model: testModel, TP: 1, PP: 2, DP: 1, Micro: 2, Seed: testSeed, Optimizer: adamw}
	dir := t.TempDir()
	trainFrom(t, 2, cfg, dir, 0, 1, true)
	gone, err := filepath.Glob(filepath.Join(dir, "shard-00001-*"))
	if err != nil || len(gone) != 1 {
		t.Fatalf("rank 1's shard: %v, %v", gone, err)
	}
	if err := os.Remove(gone[0]); err != nil {
		t.Fatal(err)
	}
	name := "reading shard file " + filepath.Base(gone[0])
	var mu sync.Mutex
	named := 0
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		e, err := hybrid.New(ctx, w.Comm, cfg)
		if err != nil {
			return err
		}
		defer e.Close()
		_, err = e.Load(ctx, dir)
		if err == nil {
			return fmt.Errorf("the load without %s succeeded", name)
		}
		n := strings.Count(err.Error(), name)
		mu.Lock()
		named += n
		mu.Unlock()
		if n > 1 {
			return fmt.Errorf("the load's error says %q %d times, want once:\n%v", name, n, err)
		}
		return nil
	})
	if named == 0 {
		t.Errorf("no rank's error says %q", name)
	}
}
