package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/compress"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// ckptFile is the checkpoint's name inside --ckpt.
const ckptFile = workload.CheckpointFile

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer workload.Close(w, &err)
	// An MPMD job's programs must agree, lest their collectives not match.
	if err := workload.AgreeFlags(ctx, w.Comm, "ddp", cfg.flags); err != nil {
		return err
	}
	// Rank 0 writes the checkpoint: a --ckpt it cannot fails here.
	check := w.Rank() == 0 && !workload.NothingToResume(cfg.ckpt, cfg.resume, w.Env().MaxRestarts)
	if err := workload.CheckCheckpointDir(ctx, w.Comm, cfg.ckpt, check); err != nil {
		return err
	}
	wl, err := workload.New(cfg.Config, w.Rank(), w.Size())
	if err != nil {
		return err
	}
	if n := cfg.BatchNote(w.Size(), "rank"); n != "" && w.Rank() == 0 {
		fmt.Fprintln(out, n)
	}
	st := wl.Model.Store()
	opt, err := wl.Optimizer(st.Params, 0, len(st.W))
	if err != nil {
		return err
	}
	ck := &nn.Checkpoint{Store: st, Optimizer: opt, Streams: wl.Streams}
	var saved *savedCodec // rank 0's, when it loaded a checkpoint
	if cfg.resume {
		// Rank 0 alone reads the checkpoint; the others stop with its
		// reason when it cannot, not at their next collective.
		if w.Rank() == 0 {
			saved, err = loadResume(cfg, wl, ck, w.Env(), out)
		}
		if err := workload.RootSays(ctx, w.Comm, err, 0); err != nil {
			return err
		}
	}
	tl := &timeline{}
	codec, _ := compress.Parse(cfg.compress, cfg.Seed) // checked with the flags
	// With one rank the codec has nothing to do (dp's hook does not run
	// it): live, the codec at work, is then none, and checkpoints carry
	// no state of it.
	live, idle := codec, ""
	if codec != nil && w.Size() == 1 {
		live, idle = nil, workload.OneReplica
	}
	dcfg := dp.Config{BucketCap: int(cfg.bucketMB * (1 << 20)), Observe: tl.observe}
	var hook *dp.Compressed
	if codec != nil {
		hook = dp.WithCompression(codec)
		dcfg.Hook = hook
	}
	d, err := dp.New(ctx, w.Comm, wl.Model, dcfg)
	if err != nil {
		return err
	}
	defer d.Close()
	ck.Meta = codecMeta(wl.CheckpointMeta(), cfg, live, w.Size(), d.Buckets()) // this run's flags, for its saves
	if cfg.resume {
		if err := shareResume(ctx, d.Comm(), ck); err != nil {
			return err
		}
		note, err := shareCodec(ctx, d.Comm(), saved, cfg, live, idle, d.Buckets())
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintln(out, note)
		}
	}
	if ck.Step >= cfg.Steps {
		if w.Rank() == 0 {
			fmt.Fprintln(out, workload.NothingToTrain(cfg.ckpt, ck.Step, cfg.Steps))
		}
		return nil
	}
	var loss float32
	first := ck.Step
	for step := ck.Step; step < cfg.Steps; step++ {
		if step+1 == cfg.crashAt && w.Rank() == 1%w.Size() && w.Env().RestartCount == 0 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL) // a rank that dies mid-training
		}
		batches, err := wl.Batches(step)
		if err != nil {
			return err
		}
		t0 := time.Now()
		stepFn := d.Step
		if cfg.local {
			stepFn = localStep(d)
		}
		local, err := stepFn(ctx, batches, opt)
		if err != nil {
			return err
		}
		dt := time.Since(t0)
		tl.endStep()
		if loss, err = d.MeanLoss(ctx, local); err != nil {
			return err
		}
		if w.Rank() == 0 {
			fmt.Fprintf(out, "step %d loss %.6f samples/s %.1f\n", step+1, loss, float64(wl.Batch())/dt.Seconds())
		}
		ck.Step = step + 1
		if cfg.ckpt != "" && (ck.Step == cfg.Steps || cfg.ckptEvery > 0 && ck.Step%cfg.ckptEvery == 0) {
			// Every rank gives rank 0 its codec state; rank 0 writes.
			if ck.Blobs, err = gatherCodec(ctx, d.Comm(), live); err != nil {
				return fmt.Errorf("saving the checkpoint: %w", err)
			}
			if w.Rank() == 0 {
				if err := save(ck, cfg.ckpt); err != nil {
					return err
				}
			}
		}
	}
	if w.Rank() == 0 {
		if w.Size() > 1 && !cfg.local { // --local has no all-reduce to time
			fmt.Fprintln(out, tl.summary())
		}
		if hook != nil && cfg.Steps > first {
			fmt.Fprintln(out, workload.CompressionReport(codec, hook.Stats(), cfg.Steps-first, idle))
		}
		fmt.Fprintf(out, "final loss %.6f\n", loss)
	}
	return nil
}

// localStep is DDP's step with the reduction left out: what a step costs
// without communication, for benchmarks.
func localStep(d *dp.DDP) func(context.Context, []*nn.Batch, nn.Optimizer) (float32, error) {
	return func(ctx context.Context, micro []*nn.Batch, opt nn.Optimizer) (float32, error) {
		loss, err := nn.Accumulate(d.Model(), micro, func(_ int, scale float32) {
			d.NoSync(func() error { d.Backward(ctx, scale); return nil })
		})
		if err == nil {
			st := d.Model().Store()
			opt.Step(st.W, st.G)
		}
		return loss, err
	}
}

func save(ck *nn.Checkpoint, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--ckpt: %w", err)
	}
	return ck.Save(filepath.Join(dir, ckptFile))
}

// loadResume is rank 0's part of --resume: it reads --ckpt's checkpoint
// into ck (nothing where none is there yet under gorun --max-restarts) and
// returns what its codec state needs.
func loadResume(cfg config, wl *workload.Workload, ck *nn.Checkpoint, env spmd.Env, out io.Writer) (*savedCodec, error) {
	var saved *savedCodec
	path := filepath.Join(cfg.ckpt, ckptFile)
	_, err := os.Stat(path)
	notice := ""
	ck.Check = func(saved map[string]string) (err error) {
		notice, err = wl.CheckSaved(cfg.ckpt, saved)
		return err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := workload.ForeignCheckpoint(cfg.ckpt, false); err != nil {
			return nil, err
		}
		if env.MaxRestarts == 0 {
			return nil, fmt.Errorf("--resume: no checkpoint at %s: train with --ckpt %s first", path, cfg.ckpt)
		}
		// A first start under gorun --max-restarts, or a failure
		// before the first checkpoint: train from the start.
		fmt.Fprintf(out, "no checkpoint at %s yet: training from step 0\n", path)
	default:
		if err := ck.Load(path); err != nil {
			return nil, err
		}
		saved = &savedCodec{meta: ck.Meta, blobs: ck.Blobs, path: path, dir: cfg.ckpt}
		if notice != "" {
			fmt.Fprintln(out, notice)
		}
		if !ck.Verified {
			fmt.Fprintf(out, "note: %s has no sha256 (saved before checkpoints carried one): loaded unverified; the next save adds one\n", path)
		}
		if env.RestartCount > 0 {
			fmt.Fprintf(out, "restart %d: resuming from step %d\n", env.RestartCount, ck.Step)
		}
	}
	return saved, nil
}

// shareResume sends what rank 0 loaded (DDP's New already sent the
// parameters) to every rank: the optimizer's state, the random streams
// and the step.
func shareResume(ctx context.Context, c *spmd.Comm, ck *nn.Checkpoint) error {
	step := []int64{int64(ck.Step)}
	if err := prims.Broadcast(ctx, c, step, 0); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	ck.Step = int(step[0])
	for _, s := range ck.Optimizer.State() {
		var err error
		if s.I64 != nil {
			err = prims.Broadcast(ctx, c, s.I64, 0)
		} else {
			err = prims.Broadcast(ctx, c, s.F32, 0)
		}
		if err != nil {
			return fmt.Errorf("resume: optimizer state %s: %w", s.Name, err)
		}
	}
	return nil
}
