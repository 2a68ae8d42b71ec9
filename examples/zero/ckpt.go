package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

// save writes the sharded checkpoint after step steps, with meta (the
// workload's CheckpointMeta) in its index. With --crash-in-save
// N, rank 1 kills itself at the N-th save, after writing its shard and
// before the index is committed: what a crash mid-save leaves (run clears
// cfg.crashInSave on a restart, so that only the first start crashes).
func save(ctx context.Context, z *zero.Zero, cfg config, meta map[string]string, step int, saves *int) error {
	*saves++
	if *saves == cfg.crashInSave && z.Comm().Rank() == 1%z.Comm().Size() {
		z.CrashAfterShard(func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	return z.Save(ctx, cfg.ckpt, step, meta)
}

// resume loads --ckpt's checkpoint and returns its step, after comparing
// the flags its index records with wl's. Under gorun --max-restarts a
// directory with no checkpoint yet means a first start; one with
// examples/ddp's checkpoint is an error.
func resume(ctx context.Context, z *zero.Zero, wl *workload.Workload, dir string, restarts bool, out io.Writer) (int, error) {
	path := filepath.Join(dir, shardckpt.IndexFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := workload.ForeignCheckpoint(dir, true); err != nil {
			return 0, err
		}
		if restarts {
			if z.Comm().Rank() == 0 {
				fmt.Fprintf(out, "no checkpoint at %s yet: training from step 0\n", path)
			}
			return 0, nil
		}
		return 0, fmt.Errorf("--resume: no checkpoint at %s: train with --ckpt %s first", path, dir)
	}
	// A corrupt index is z.Load's to report, on every rank.
	if ix, err := shardckpt.Open(dir); err == nil {
		notice, err := wl.CheckSaved(dir, ix.Meta())
		if err != nil {
			return 0, fmt.Errorf("--resume: %s: %w: %w", path, nn.ErrCheckpoint, err)
		}
		if notice != "" && z.Comm().Rank() == 0 {
			fmt.Fprintln(out, notice)
		}
		note, err := codecNote(z, dir, ix.Meta())
		if err != nil {
			return 0, fmt.Errorf("--resume: %s: %w: %w", path, nn.ErrCheckpoint, err)
		}
		if note != "" && z.Comm().Rank() == 0 {
			fmt.Fprintln(out, note)
		}
	}
	step, err := z.Load(ctx, dir)
	if err != nil {
		return 0, err
	}
	if z.Comm().Rank() == 0 {
		fmt.Fprintf(out, "resuming from step %d of %s\n", step, dir)
	}
	return step, nil
}

// codecNote compares the codec state that a checkpoint's index records
// (meta) with this run's codec, ranks and sharding, before z.Load
// restores it: another codec, number of ranks or layout is an error that
// says what to pass; a checkpoint without state for this run's codec, or
// one with state that this run does not use (a codec with nothing to do
// included: z.Load drops its state), a note.
func codecNote(z *zero.Zero, dir string, meta map[string]string) (string, error) {
	codec, idle := z.Config().Compress, idleCodec(z)
	if idle != "" {
		codec = nil
	}
	saved, has := meta[zero.MetaCodecRanks]
	name := meta[zero.MetaCodec]
	switch {
	case !has && compress.Stateful(codec):
		return fmt.Sprintf("note: the checkpoint in %s has no codec state (saved without --compress %s, or before checkpoints carried it): the residuals start from zero", dir, compress.StateName(codec)), nil
	case !has:
		return "", nil
	case !compress.Stateful(codec):
		return fmt.Sprintf("note: the checkpoint in %s carries the codec state of --compress %s, which this run (--compress %s) does not use%s", dir, name, compress.StateName(z.Config().Compress), workload.IdleCodec(idle)), nil
	case name != compress.StateName(codec):
		return "", fmt.Errorf("it carries the codec state of --compress %s, which this run's --compress %s cannot take: pass --compress %s, or resume without --compress (the state is dropped), or another --ckpt", name, codec.Name(), name)
	case saved != strconv.Itoa(z.Comm().Size()):
		return "", fmt.Errorf("it carries the codec states of %s ranks, one each, which cannot be re-split for %d: run it on %s ranks (gorun -np %s), or resume without --compress (the state is dropped), or another --ckpt", saved, z.Comm().Size(), saved, saved)
	case meta[zero.MetaCodecLayout] != z.CodecLayout():
		return "", fmt.Errorf("its codec state is of the reductions of %s, which %s does not make alike: pass the --zero or --shard it was saved with, or resume without --compress (the state is dropped), or another --ckpt", meta["zero.config"], z.Config())
	}
	return "", nil
}
