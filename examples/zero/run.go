package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

// trainer is what a step needs: zero's driver, or DDP's for comparison.
type trainer interface {
	Step(ctx context.Context, micro []*nn.Batch) (float32, error)
	MeanLoss(ctx context.Context, loss float32) (float32, error)
	Memory() zero.Memory
	Close() error
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer workload.Close(w, &err)
	// An MPMD job's programs must agree, lest their collectives not match.
	if err := workload.AgreeFlags(ctx, w.Comm, "zero", cfg.flags); err != nil {
		return err
	}
	// Every rank writes its shard: a --ckpt one cannot fails here.
	if err := workload.CheckCheckpointDir(ctx, w.Comm, cfg.ckpt, true); err != nil {
		return err
	}
	wl, err := workload.New(cfg.Config, w.Rank(), w.Size())
	if err != nil {
		return err
	}
	if n := cfg.BatchNote(w.Size(), "rank"); n != "" && w.Rank() == 0 {
		fmt.Fprintln(out, n)
	}
	var tr trainer
	if cfg.ddp {
		tr, err = newDDP(ctx, w.Comm, wl)
	} else {
		zc := cfg.zero
		zc.Optimizer = wl.Optimizer
		var z *zero.Zero
		z, err = zero.New(ctx, w.Comm, wl.Model, zc)
		tr = z
	}
	if err != nil {
		return err
	}
	defer tr.Close()
	if w.Rank() == 0 {
		name := cfg.zero.String()
		if cfg.ddp {
			name = "ddp"
		}
		ranks := "ranks"
		if w.Size() == 1 {
			ranks = "rank"
		}
		fmt.Fprintf(out, "%s on %d %s, %s model\n", name, w.Size(), ranks, cfg.Model)
	}
	first := 0
	if z, ok := tr.(*zero.Zero); ok && cfg.resume {
		if first, err = resume(ctx, z, wl, cfg.ckpt, w.Env().MaxRestarts > 0, out); err != nil {
			return err
		}
	}
	if first >= cfg.Steps {
		if w.Rank() == 0 {
			fmt.Fprintln(out, workload.NothingToTrain(cfg.ckpt, first, cfg.Steps))
		}
		return nil
	}
	if w.Env().RestartCount > 0 {
		cfg.crashInSave = 0 // it crashed the first start: let the restart go on
	}
	var loss float32
	saves := 0
	for step := first; step < cfg.Steps; step++ {
		batches, err := wl.Batches(step)
		if err != nil {
			return err
		}
		t0 := time.Now()
		local, err := tr.Step(ctx, batches)
		if err != nil {
			return err
		}
		dt := time.Since(t0)
		if loss, err = tr.MeanLoss(ctx, local); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Fprintf(out, "step %d loss %.6f samples/s %.1f\n", step+1, loss, float64(wl.Batch())/dt.Seconds())
		}
		if z, ok := tr.(*zero.Zero); ok && cfg.ckpt != "" && (step+1 == cfg.Steps || cfg.ckptEvery > 0 && (step+1)%cfg.ckptEvery == 0) {
			if err := save(ctx, z, cfg, wl.CheckpointMeta(), step+1, &saves); err != nil {
				return err
			}
		}
	}
	if w.Rank() == 0 {
		if z, ok := tr.(*zero.Zero); ok && cfg.zero.Compress != nil && cfg.Steps > first {
			fmt.Fprintln(out, workload.CompressionReport(cfg.zero.Compress, z.Compression(), cfg.Steps-first, idleCodec(z)))
		}
		fmt.Fprintf(out, "final loss %.6f\n", loss)
	}
	return report(ctx, w.Comm, tr.Memory(), out)
}

// idleCodec says why z's codec has nothing to do (zero.CodecActive), as
// workload.CompressionReport takes it: "" when it works.
func idleCodec(z *zero.Zero) string {
	switch {
	case z.Config().Compress == nil || z.CodecActive():
		return ""
	case z.Config().Hybrid && z.Comm().Size() > 1:
		return "hybrid sharding on one host, whose reduce-scatter stays exact"
	}
	return workload.OneReplica
}

// report gathers every rank's memory to rank 0, which prints a line per
// rank.
func report(ctx context.Context, c *spmd.Comm, m zero.Memory, out io.Writer) error {
	mine := []int64{m.Params, m.Grads, m.Optim, m.Peak, heapInUse()}
	all := make([]int64, len(mine)*c.Size())
	if err := prims.Gather(ctx, c, mine, all, 0); err != nil {
		return fmt.Errorf("memory report: %w", err)
	}
	if c.Rank() != 0 {
		return nil
	}
	for r := range c.Size() {
		v := all[r*len(mine):]
		fmt.Fprintf(out, "memory rank %d params %d grads %d optim %d peak %d heap %d\n", r, v[0], v[1], v[2], v[3], v[4])
	}
	return nil
}

// heapInUse is the Go heap's live objects after a collection.
func heapInUse() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// ddpTrainer is DDP behind the trainer interface, with the memory DDP
// holds: the model's parameters and gradients and the optimizer's state.
type ddpTrainer struct {
	*dp.DDP
	opt nn.Optimizer
}

func newDDP(ctx context.Context, c *spmd.Comm, wl *workload.Workload) (*ddpTrainer, error) {
	st := wl.Model.Store()
	opt, err := wl.Optimizer(st.Params, 0, len(st.W))
	if err != nil {
		return nil, err
	}
	d, err := dp.New(ctx, c, wl.Model, dp.Config{})
	if err != nil {
		return nil, err
	}
	return &ddpTrainer{DDP: d, opt: opt}, nil
}

func (d *ddpTrainer) Step(ctx context.Context, micro []*nn.Batch) (float32, error) {
	return d.DDP.Step(ctx, micro, d.opt)
}

func (d *ddpTrainer) Memory() zero.Memory {
	st := d.Model().Store()
	m := zero.Memory{Params: int64(4 * len(st.W)), Grads: int64(4 * len(st.G))}
	for _, s := range d.opt.State() {
		m.Optim += int64(4*len(s.F32) + 8*len(s.I64))
	}
	m.Peak = m.Total()
	return m
}
