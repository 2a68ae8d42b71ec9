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

// planJob measures this job's machine (topo's link constants, a GEMM and
// a copy timed on every rank at once, so that ranks sharing cores count
// as such) and prints the planner's ranking of the layouts.
func planJob(ctx context.Context, w *spmd.World, c config, model nn.GPTConfig, out io.Writer) error {
	limit, _ := spmd.ParseSize(c.memLimit)
	tm, err := topo.ModelFor(ctx, w.Comm)
	if err != nil {
		return err
	}
	rates := []float64{gemmRate(c.embd), copyRate()}
	if err := prims.AllReduce(ctx, w.Comm, rates, prims.Min[float64]()); err != nil {
		return err
	}
	mach := plan.Machine{Flops: rates[0], MemBandwidth: rates[1],
		AlphaNear: tm.Local.Alpha, BetaNear: tm.Local.Beta, AlphaFar: tm.Remote.Alpha, BetaFar: tm.Remote.Beta}
	job := plan.Job{Model: model, Seq: c.block, GlobalBatch: c.batch, Ranks: w.Size(), RanksPerHost: w.LocalSize(), MemPerRank: int64(limit)}
	es, err := plan.Rank(job, mach)
	if err != nil {
		return err
	}
	if w.Rank() != 0 {
		return nil
	}
	fmt.Fprintf(out, "machine: %.2f GFLOP/s a rank, copy %.1f GB/s, near link %.1f us + %.2f GB/s, far %.1f us + %.2f GB/s\n",
		mach.Flops/1e9, mach.MemBandwidth/1e9, mach.AlphaNear*1e6, 1/mach.BetaNear/1e9, mach.AlphaFar*1e6, 1/mach.BetaFar/1e9)
	return plan.Write(out, es, c.top)
}

// gemmRate times the MLP's first product, [512, dim] x [dim, 4·dim],
// through the layers' own GEMM, for about 200 ms.
func gemmRate(dim int) float64 {
	const rows = 512
	b := nn.NewBuilder()
	l := nn.NewLinear(b.Scope("probe"), dim, 4*dim, false)
	b.Build(1)
	x := nn.NewTensor(rows, dim)
	l.Forward(x, false)
	n, t0 := 0, time.Now()
	for time.Since(t0) < 200*time.Millisecond {
		l.Forward(x, false)
		n++
	}
	return float64(n) * 2 * rows * float64(dim) * 4 * float64(dim) / time.Since(t0).Seconds()
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
