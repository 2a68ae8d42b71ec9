package zero_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

// exact is a codec that compresses nothing: a plain sum, so that a driver
// that uses it must train exactly as without it. Its calls are counted.
type exact struct{ calls *int }

func (exact) Name() string { return "exact" }

func (e exact) AllReduce(ctx context.Context, c *spmd.Comm, _ int, buf []float32, _ []compress.Segment) (compress.Stats, error) {
	*e.calls++
	return compress.Stats{Raw: int64(4 * len(buf)), Sent: int64(4 * len(buf))}, prims.AllReduce(ctx, c, buf, prims.Sum[float32]())
}

// exactRS reduce-scatters too, as fp16 and bf16 do.
type exactRS struct {
	exact
	scatters *int
}

func (e exactRS) ReduceScatter(ctx context.Context, c *spmd.Comm, _ int, buf, recv []float32, _ []compress.Segment) (compress.Stats, error) {
	*e.scatters++
	return compress.Stats{Raw: int64(4 * len(buf)), Sent: int64(4 * len(buf))}, prims.ReduceScatter(ctx, c, buf, recv, prims.Sum[float32]())
}

// agree fails unless every rank of c holds rank 0's parameters bit for bit.
func agree(ctx context.Context, c *spmd.Comm, params []float32) error {
	mine := append([]float32(nil), params...)
	if err := prims.Broadcast(ctx, c, params, 0); err != nil {
		return err
	}
	for i := range mine {
		if math.Float32bits(mine[i]) != math.Float32bits(params[i]) {
			return fmt.Errorf("rank %d: parameter %d is %g, rank 0's %g", c.Rank(), i, mine[i], params[i])
		}
	}
	return nil
}

// TestCompressedExact: through a codec that compresses nothing, every
// stage trains as DDP does on each of the driver's compressed paths: the
// replicas' all-reduce (stage 0), the codec's reduce-scatter, the
// all-reduce of the unit with the chunk kept (stages 1-3), and the
// all-reduce across hosts after the host's reduce-scatter (hybrid).
func TestCompressedExact(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		want := onRank0(t, spmdtest.Mem, n, func(ctx context.Context, c *spmd.Comm) (run, error) { return ddp(ctx, t, c) })
		for stage := range 4 {
			for _, rs := range []bool{false, true} {
				label := fmt.Sprintf("stage%d/reduce-scatter=%v/np=%d", stage, rs, n)
				t.Run(label, func(t *testing.T) {
					calls := make([]int, n)
					scatters := make([]int, n)
					got := onRank0(t, spmdtest.Mem, n, func(ctx context.Context, c *spmd.Comm) (run, error) {
						var codec compress.Codec = exact{&calls[c.Rank()]}
						if rs {
							codec = exactRS{exact{&calls[c.Rank()]}, &scatters[c.Rank()]}
						}
						return train(ctx, t, c, newMLP, zero.Config{Stage: stage, Compress: codec}, 1+stage%2)
					})
					if t.Failed() {
						return
					}
					same(t, label, got, want, 1e-5)
					if calls[0]+scatters[0] == 0 {
						t.Errorf("the codec was never called")
					}
					if rs && stage > 0 && (scatters[0] == 0 || calls[0] != 0) {
						t.Errorf("a reduce-scattering codec: %d reduce-scatters and %d all-reduces, want only reduce-scatters", scatters[0], calls[0])
					}
				})
			}
		}
	}
	hosts := []string{"a", "a", "b", "b"}
	want := onRank0(t, spmdtest.Mem, len(hosts), func(ctx context.Context, c *spmd.Comm) (run, error) { return ddp(ctx, t, c) })
	for _, stage := range []int{1, 3} {
		label := fmt.Sprintf("hybrid/stage%d", stage)
		calls := make([]int, len(hosts))
		var got run
		spmdtest.RunHosts(t, hosts, func(ctx context.Context, w *spmd.World) error {
			r, err := train(ctx, t, w.Comm, newMLP, zero.Config{Stage: stage, Hybrid: true, Compress: exact{&calls[w.Rank()]}}, 1)
			if w.Rank() == 0 {
				got = r
			}
			return err
		})
		if !t.Failed() {
			same(t, label, got, want, 1e-5)
			if calls[0] == 0 {
				t.Errorf("%s: the codec was never called", label)
			}
		}
	}
}

// TestCompressedCodecs: each real codec through each stage on 3 ranks
// (units padded to a multiple of 3) leaves every rank with the same parameters after training, and
// trains. Stages 1-3 equal stage 0 within 1e-5: the codec sees the same
// whole unit at each (its all-reduce, the chunk kept), or, for fp16 and
// bf16, which reduce-scatter, the same sums in another order, each
// rounded to 16 bits (fp16 5e-3, bf16 3e-2: AdamW magnifies the
// rounding).
func TestCompressedCodecs(t *testing.T) {
	for _, n := range []int{3} {
		for _, spec := range []string{"fp16", "bf16", "topk:0.1", "sign", "qsgd:16", "powersgd:2", "randk:0.2", "topk:0.1+s2"} {
			var stage0 run
			for _, stage := range []int{0, 1, 2, 3} {
				label := fmt.Sprintf("%s/stage%d/np=%d", spec, stage, n)
				var stats compress.Stats
				got := onRank0(t, spmdtest.Mem, n, func(ctx context.Context, c *spmd.Comm) (run, error) {
					codec, err := compress.Parse(spec, 11)
					if err != nil {
						return run{}, err
					}
					z, err := zero.New(ctx, c, newMLP(), zero.Config{Stage: stage, Compress: codec, Optimizer: adamw})
					if err != nil {
						return run{}, err
					}
					defer z.Close()
					r, err := trainWith(ctx, t, c, z, 1)
					if err != nil {
						return run{}, err
					}
					if c.Rank() == 0 {
						stats = z.Compression()
					}
					return r, agree(ctx, c, r.params)
				})
				if t.Failed() {
					return
				}
				if first, last := got.losses[0], got.losses[steps-1]; !(last < 0.9*first) {
					t.Errorf("%s did not train: loss %.4f at step 1, %.4f at step %d", label, first, last, steps)
				}
				if stats.Sent == 0 || stats.Raw == 0 {
					t.Errorf("%s: Compression() = %+v, want bytes counted", label, stats)
				}
				tol := map[string]float64{"fp16": 5e-3, "bf16": 3e-2}[spec]
				if tol == 0 {
					tol = 1e-5
				}
				if stage == 0 {
					stage0 = got
				} else {
					same(t, label+" against stage 0", got, stage0, tol)
				}
			}
		}
	}
}

// TestCompressedMixedRefused: mixed precision with a codec is refused
// with a message that names both.
func TestCompressedMixedRefused(t *testing.T) {
	spmdtest.RunOn(t, spmdtest.Mem, 1, func(ctx context.Context, w *spmd.World) error {
		codec, err := compress.Parse("fp16", 0)
		if err != nil {
			return err
		}
		_, err = zero.New(ctx, w.Comm, newMLP(), zero.Config{Stage: 1, Mixed: true, Compress: codec, Optimizer: adamw})
		if err == nil || !strings.Contains(err.Error(), "fp16") || !strings.Contains(err.Error(), "Mixed") {
			t.Errorf("zero.New with Mixed and fp16: %v, want an error naming both", err)
		}
		return nil
	})
}

// TestCompressedHybridOneHost: hybrid sharding on one host has no
// reduction across hosts, and the host's reduce-scatter stays exact: the
// codec is never called, the run trains as DDP does, and it moves no
// bytes.
func TestCompressedHybridOneHost(t *testing.T) {
	hosts := []string{"a", "a"}
	want := onRank0(t, spmdtest.Mem, len(hosts), func(ctx context.Context, c *spmd.Comm) (run, error) { return ddp(ctx, t, c) })
	for _, stage := range []int{1, 3} {
		label := fmt.Sprintf("hybrid/stage%d/one host", stage)
		var got run
		var active []bool
		var stats compress.Stats
		spmdtest.RunHosts(t, hosts, func(ctx context.Context, w *spmd.World) error {
			codec, err := compress.Parse("topk:0.1", 11)
			if err != nil {
				return err
			}
			z, err := zero.New(ctx, w.Comm, newMLP(), zero.Config{Stage: stage, Hybrid: true, Compress: codec, Optimizer: adamw})
			if err != nil {
				return err
			}
			defer z.Close()
			r, err := trainWith(ctx, t, w.Comm, z, 1)
			if w.Rank() == 0 {
				got, active, stats = r, append(active, z.CodecActive()), z.Compression()
			}
			return err
		})
		if t.Failed() {
			return
		}
		same(t, label, got, want, 1e-5)
		if active[0] || stats != (compress.Stats{}) {
			t.Errorf("%s: CodecActive %v, Compression %+v: want an idle codec", label, active[0], stats)
		}
	}
}

// TestCodecIdleCheckpoint: a codec with no work (one rank) saves no
// state, and drops the state a checkpoint carries instead of refusing it
// for another number of ranks.
func TestCodecIdleCheckpoint(t *testing.T) {
	dir := t.TempDir()
	topk := func() compress.Codec {
		c, err := compress.Parse("topk:0.1", 11)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	onRank0(t, spmdtest.Mem, 2, func(ctx context.Context, c *spmd.Comm) (run, error) {
		return segment(ctx, t, c, zero.Config{Stage: 3, Compress: topk()}, dir, false, true, 0, 3)
	})
	if ix, err := shardckpt.Open(dir); err != nil || ix.Meta()[zero.MetaCodec] == "" {
		t.Fatalf("the 2-rank save carries no codec state (%v): the test cannot see it dropped", err)
	}
	onRank0(t, spmdtest.Mem, 1, func(ctx context.Context, c *spmd.Comm) (run, error) {
		return segment(ctx, t, c, zero.Config{Stage: 3, Compress: topk()}, dir, true, true, 3, 5)
	})
	ix, err := shardckpt.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := ix.Meta()[zero.MetaCodec]; ok {
		t.Errorf("the one-rank save records codec state %q", v)
	}
}
