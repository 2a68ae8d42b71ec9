package hybrid

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/strategies/dp"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/pipe"
	"github.com/gorun-hpc/gorun/strategies/tp"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

// Engine trains the GPT on a mesh: each rank holds its tensor-parallel
// part of its pipeline stage's chunks, runs the schedule over the step's
// micro-batches, and syncs its gradients over its data-parallel group
// (DDP or ZeRO) before the optimizer step. Without a pipeline (PP 1) the
// rank's part is the whole model, and strategies/zero runs it over the
// data-parallel group (its stage 0 is DDP), with every stage of ZeRO,
// or, with compression, strategies/dp with a compressing hook.
// An Engine is used by one goroutine at a time.
type Engine struct {
	cfg   Config
	mesh  *Mesh
	group *tp.Group
	rng   *tp.RNG
	parts []*Part // this rank's chunks: chunk Mesh.P + PP·k is parts[k]
	sched *pipe.Schedule
	zero  *zero.Zero // PP 1
	ddp   *dp.DDP    // PP 1 with compression, and its hook and optimizer
	hook  *dp.Compressed
	opt   nn.Optimizer
	sync  *dpSync     // PP > 1
	micro []*nn.Batch // the step's
	loss  float32     // the step's sum over the last chunk's micro-batches
	act   int         // floats of an activation between chunks
}

// New builds the mesh on c and this rank's chunks; every rank of c calls
// it with the same configuration.
func New(ctx context.Context, c *spmd.Comm, cfg Config) (e *Engine, err error) {
	if err := cfg.Validate(c.Size()); err != nil {
		return nil, err
	}
	e = &Engine{cfg: cfg, rng: tp.NewRNG(cfg.Seed)}
	// Close what is built on any error below, with the engine as it is
	// now: a return of nil, err clears e before deferred calls run.
	defer func(e *Engine) {
		if err != nil {
			e.Close()
		}
	}(e)
	if e.mesh, err = NewMesh(ctx, c, cfg.TP, cfg.DP, cfg.PP); err != nil {
		return nil, err
	}
	e.group = tp.NewGroup(e.mesh.TPComm, cfg.SeqParallel)
	e.group.Bind(ctx)
	if e.sched, err = pipe.New(cfg.Schedule, cfg.PP, cfg.Micro, cfg.Virtual); err != nil {
		return nil, err
	}
	per := cfg.Model.Layers / cfg.Chunks()
	for ch := e.mesh.P; ch < cfg.Chunks(); ch += cfg.PP {
		p, err := NewPart(cfg.Model, e.group, e.rng, cfg.Seed, ch*per, (ch+1)*per, ch == 0, ch == cfg.Chunks()-1)
		if err != nil {
			return nil, err
		}
		e.parts = append(e.parts, p)
	}
	if cfg.PP == 1 && cfg.Compress != nil && cfg.Zero == 0 {
		st := e.parts[0].Store()
		if e.opt, err = cfg.Optimizer(st.Params, 0, len(st.W)); err != nil {
			return nil, err
		}
		e.hook = dp.WithCompression(cfg.Compress)
		if e.ddp, err = dp.New(ctx, e.mesh.DPComm, e.parts[0], dp.Config{Hook: e.hook}); err != nil {
			return nil, err
		}
		return e, nil
	}
	if cfg.PP == 1 {
		e.zero, err = zero.New(ctx, e.mesh.DPComm, e.parts[0], zero.Config{Stage: cfg.Zero, Optimizer: cfg.Optimizer, Compress: cfg.Compress})
		if err != nil {
			return nil, err
		}
		return e, nil
	}
	if e.sync, err = newSync(ctx, e.mesh.DPComm, e.parts, cfg); err != nil {
		return nil, err
	}
	return e, nil
}

// Mesh returns the rank's place in the mesh and its groups.
func (e *Engine) Mesh() *Mesh { return e.mesh }

// Parts returns this rank's chunks, in model order.
func (e *Engine) Parts() []*Part { return e.parts }

// Schedule returns the pipeline's schedule.
func (e *Engine) Schedule() *pipe.Schedule { return e.sched }

// Step runs one optimizer step over b, this data-parallel replica's
// batch (every rank of a replica passes the same one: the first stage
// reads its tokens, the last its targets), cut into Config.Micro
// micro-batches. b.First says where it sits in the step's batch over
// every replica (data.Sampler.Local gives replica d the block from
// d·LocalBatch): dropout masks the whole batch's rows, so that the mesh
// trains as one rank does on that batch. It returns the step's mean loss over every replica, on
// every rank.
func (e *Engine) Step(ctx context.Context, b *nn.Batch) (loss float32, err error) {
	defer trace.Region(ctx, "step").End()
	micro, err := e.cut(b)
	if err != nil {
		return 0, err
	}
	e.group.Bind(ctx)
	e.rng.BeginStep()
	if err := e.group.SetTokens(micro[0].N, micro[0].T); err != nil {
		return 0, err
	}
	_, rows := e.group.RowBlock()
	e.act = rows * e.cfg.Model.Dim
	if e.zero != nil || e.ddp != nil {
		if e.zero != nil {
			loss, err = e.zero.Step(ctx, micro)
		} else {
			loss, err = e.stepDDP(ctx, micro)
		}
		if err != nil {
			return 0, err
		}
		return e.mean(ctx, e.mesh.DPComm, loss/float32(e.cfg.DP))
	}
	for _, p := range e.parts {
		p.Store().ZeroGrads()
	}
	e.micro, e.loss = micro, 0
	span := trace.Region(ctx, "pipeline")
	err = pipe.Run(ctx, e.mesh.PPComm, pipe.Config{Schedule: e.sched, Len: e.act, Observe: e.cfg.Observe}, e)
	span.End()
	e.micro = nil
	if err != nil {
		return 0, err
	}
	if err := e.sync.step(ctx); err != nil {
		return 0, err
	}
	// The last stage holds the loss: sum it down the pipeline, then
	// average the replicas.
	mine := float32(0)
	if e.parts[len(e.parts)-1].Last {
		mine = e.loss / float32(e.cfg.Micro)
	}
	if loss, err = e.mean(ctx, e.mesh.PPComm, mine); err != nil {
		return 0, err
	}
	return e.mean(ctx, e.mesh.DPComm, loss/float32(e.cfg.DP))
}

// stepDDP runs a step through DDP with the compression hook, recovering
// a tensor-parallel collective's failure in the passes.
func (e *Engine) stepDDP(ctx context.Context, micro []*nn.Batch) (loss float32, err error) {
	defer nn.RecoverAbort(&err)
	return e.ddp.Step(ctx, micro, e.opt)
}

// CodecActive reports whether Config.Compress has work: a codec is set
// and there is more than one data-parallel replica to average the
// gradients over. With one (tensor and pipeline parallelism only) no
// codec runs, on any path: the gradients stay exact, Compression stays
// zero and a checkpoint carries no codec state.
func (e *Engine) CodecActive() bool { return e.cfg.Compress != nil && e.mesh.DP > 1 }

// Compression returns what the gradients' compression has moved since
// New (zero Stats without it).
func (e *Engine) Compression() compress.Stats {
	switch {
	case e.hook != nil:
		return e.hook.Stats()
	case e.sync != nil:
		return e.sync.stats
	case e.zero != nil:
		return e.zero.Compression()
	}
	return compress.Stats{}
}

// mean sums v over c (the callers divide first).
func (e *Engine) mean(ctx context.Context, c *spmd.Comm, v float32) (float32, error) {
	buf := []float32{v}
	if c.Size() > 1 {
		if err := prims.AllReduce(ctx, c, buf, prims.Sum[float32]()); err != nil {
			return 0, fmt.Errorf("hybrid: the step's loss: %w", err)
		}
	}
	return buf[0], nil
}

// cut checks b and cuts it into the step's micro-batches.
func (e *Engine) cut(b *nn.Batch) ([]*nn.Batch, error) {
	if err := e.parts[0].Check(b); err != nil {
		return nil, err
	}
	m := e.cfg.Micro
	if b.N%m != 0 {
		return nil, fmt.Errorf("hybrid: a batch of %d sequences does not cut into %d micro-batches: pass a batch that divides by --microbatches", b.N, m)
	}
	n := b.N / m
	out := make([]*nn.Batch, m)
	for i := range out {
		lo, hi := i*n*b.T, (i+1)*n*b.T
		out[i] = &nn.Batch{N: n, T: b.T, Tokens: b.Tokens[lo:hi], Y: b.Y[lo:hi], First: b.First + i*n}
	}
	return out, nil
}

// Close frees the driver's communicators.
func (e *Engine) Close() error {
	var errs []error
	if e.zero != nil {
		errs = append(errs, e.zero.Close())
	}
	if e.ddp != nil {
		errs = append(errs, e.ddp.Close())
	}
	if e.sync != nil {
		errs = append(errs, e.sync.close())
	}
	if e.mesh != nil {
		errs = append(errs, e.mesh.Close())
	}
	return errors.Join(errs...)
}
