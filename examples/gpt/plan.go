package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/hybrid/plan"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/topo"
)

// planJob measures this job's machine and prints the planner's ranking
// of the layouts. Rank 0 times a block of the model alone while the
// others wait (its forward and backward through the layers' own code,
// and apart the LayerNorms and residual adds that tensor parallelism
// repeats on every rank) and a copy; topo gives the links, the cores of
// a host and the wake-up cost of a crowded one.
func planJob(ctx context.Context, w *spmd.World, c config, model nn.GPTConfig, out io.Writer) error {
	limit, _ := spmd.ParseSize(c.memLimit)
	tm, err := topo.ModelFor(ctx, w.Comm)
	if err != nil {
		return err
	}
	probe := make([]float64, 3)
	if err := w.Barrier(ctx); err != nil {
		return err
	}
	if w.Rank() == 0 {
		probe[0], probe[1] = blockRate(model)
		probe[2] = copyRate()
	}
	if err := prims.Broadcast(ctx, w.Comm, probe, 0); err != nil {
		return err
	}
	mach := plan.Machine{Flops: probe[0], Replicated: probe[1], MemBandwidth: probe[2], Cores: tm.Cores, Wake: tm.Wake,
		AlphaNear: tm.Local.Alpha, BetaNear: tm.Local.Beta, AlphaFar: tm.Remote.Alpha, BetaFar: tm.Remote.Beta}
	job := plan.Job{Model: model, Seq: c.block, GlobalBatch: c.batch, Ranks: w.Size(), RanksPerHost: w.LocalSize(), MemPerRank: int64(limit)}
	es, err := plan.Rank(job, mach)
	if err != nil {
		return err
	}
	if w.Rank() != 0 {
		return nil
	}
	fmt.Fprintf(out, "machine: a block at %.2f GFLOP/s, %.0f ns a token of LayerNorms and adds, copy %.1f GB/s, %d cores a host, wake %.1f us, near link %.1f us + %.2f GB/s, far %.1f us + %.2f GB/s\n",
		mach.Flops/1e9, mach.Replicated*1e9, mach.MemBandwidth/1e9, mach.Cores, mach.Wake*1e6, mach.AlphaNear*1e6, 1/mach.BetaNear/1e9, mach.AlphaFar*1e6, 1/mach.BetaFar/1e9)
	return plan.Write(out, es, c.top)
}

// blockRate times the forward and backward of one of the model's blocks
// on 2 sequences, for about 300 ms, and apart from it the work tensor
// parallelism does not split (two LayerNorms and four residual adds). It
// returns the block's FLOPs (the planner's count) per second of the
// rest, and the seconds per token of the LayerNorms and adds.
func blockRate(model nn.GPTConfig) (flops, replicated float64) {
	const n = 2
	T, C := model.Context, model.Dim
	b := nn.NewBuilder()
	blk := nn.NewBlock(b.Scope("h.0"), model, nil)
	ln1, ln2 := nn.NewLayerNorm(b.Scope("a"), C), nn.NewLayerNorm(b.Scope("b"), C)
	st := b.Build(1)
	x := nn.NewTensor(n, T, C)
	for i := range x.Data {
		x.Data[i] = float32(i%7) - 3
	}
	y := nn.NewTensor(n, T, C)
	blockTime := timed(func() {
		blk.Backward(blk.Forward(x, true))
	})
	repTime := timed(func() {
		ln1.Backward(ln1.Forward(x, true))
		ln2.Backward(ln2.Forward(x, true))
		for range 4 {
			for i, v := range x.Data {
				y.Data[i] += v
			}
		}
	})
	st.ZeroGrads()
	tokens := float64(n * T)
	work := tokens * 3 * (24*float64(C*C) + 4*float64(T*C))
	return work / max(blockTime-repTime, blockTime/10), repTime / tokens
}

// timed returns the seconds one call of f takes, the mean of calls for
// about 150 ms after one to warm up.
func timed(f func()) float64 {
	f()
	n, t0 := 0, time.Now()
	for time.Since(t0) < 150*time.Millisecond {
		f()
		n++
	}
	return time.Since(t0).Seconds() / float64(n)
}

// copyRate times copies of 16 MiB, for about 100 ms.
func copyRate() float64 {
	a, b := make([]float32, 4<<20), make([]float32, 4<<20)
	copy(b, a)
	n, t0 := 0, time.Now()
	for time.Since(t0) < 100*time.Millisecond {
		copy(b, a)
		n++
	}
	return float64(n) * 2 * (16 << 20) / time.Since(t0).Seconds()
}
