// Command ddp trains a model with distributed data parallelism
// (strategies/dp): the 784-1024-1024-10 MLP on a synthetic set, or a
// character-level GPT on the Go distribution's own source (or --data).
// Run alone it trains in one process; under gorun each rank takes its
// slice of every global batch and the gradients are averaged in buckets
// overlapped with backward.
//
//	go run ./examples/ddp --steps 50
//	gorun -np 2 ./examples/ddp --model mlp --batch 128 --steps 100
//	gorun -np 4 ./examples/ddp --model gpt --batch 32 --optim adamw --lr 1e-3
//	gorun -np 2 ./examples/ddp --ckpt ckpt --steps 100          # save at the end
//	gorun -np 2 ./examples/ddp --ckpt ckpt --resume --steps 200 # go on from it
//
// --batch is the global batch (by default 64, rounded down to a multiple
// of the ranks x --accum, or ranks x --accum where that is more, after a
// "note:" line). Rank 0 prints one line per step, "step N loss L
// samples/s S" (N from 1), and at the end "final loss L". The loss is the
// mean over the global batch. Resumed from a checkpoint at or past --steps,
// it trains nothing and says so.
package main

import (
	"flag"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
)

func main() { workload.Main("ddp", parseFlags, run) }

// about is what --help says before the flags.
const about = `ddp trains a model with distributed data parallelism (strategies/dp): alone
in one process, or under gorun with each rank taking its slice of every global batch.

  gorun -np N ./examples/ddp [flags]`

// config is the flags.
type config struct {
	workload.Config
	bucketMB  float64
	ckpt      string
	ckptEvery int
	resume    bool
	local     bool
	crashAt   int
	compress  string
	flags     []string // every flag's value (workload.FlagValues), for the ranks to compare
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	cfg := config{Config: workload.DefaultConfig(), bucketMB: 25}
	cfg.Register(fs)
	fs.Float64Var(&cfg.bucketMB, "bucket-mb", cfg.bucketMB, "gradient bucket cap in MiB (the first bucket is at most 1 MiB)")
	fs.StringVar(&cfg.ckpt, "ckpt", "", "directory of the checkpoint: written by rank 0 at the end (and every --ckpt-every steps)")
	fs.IntVar(&cfg.ckptEvery, "ckpt-every", 0, "also save every N steps (0: only at the end)")
	fs.BoolVar(&cfg.resume, "resume", false, "continue from --ckpt's checkpoint (rank 0 reads it and sends it to the others); under gorun --max-restarts, start afresh when there is none yet")
	fs.IntVar(&cfg.crashAt, "crash-at", 0, "for tests of restarts: rank 1 kills itself (SIGKILL) as it begins step N, on the job's first start only")
	fs.BoolVar(&cfg.local, "local", false, "for benchmarks: the same steps with no gradient reduction (each rank trains on its own)")
	fs.StringVar(&cfg.compress, "compress", "none", "gradient compression: none, "+compress.Names)
	if err := workload.Parse(fs, args, about); err != nil {
		return cfg, err
	}
	cfg.flags = workload.FlagValues(fs)
	if _, err := compress.Parse(cfg.compress, cfg.Seed); err != nil {
		return cfg, fmt.Errorf("--compress: %w", err)
	}
	switch {
	case cfg.bucketMB <= 0:
		return cfg, fmt.Errorf("--bucket-mb %g: want a positive size", cfg.bucketMB)
	case cfg.resume && cfg.ckpt == "":
		return cfg, fmt.Errorf("--resume needs --ckpt DIR, the directory to resume from")
	case cfg.crashAt < 0:
		return cfg, fmt.Errorf("--crash-at %d: want a step, 1 or more", cfg.crashAt)
	case cfg.ckptEvery < 0:
		return cfg, fmt.Errorf("--ckpt-every %d: want 0 or more", cfg.ckptEvery)
	case cfg.ckptEvery > 0 && cfg.ckpt == "":
		return cfg, fmt.Errorf("--ckpt-every %d needs --ckpt DIR, the directory to save to", cfg.ckptEvery)
	case cfg.local && cfg.compress != "none" && cfg.compress != "":
		return cfg, fmt.Errorf("--compress %s with --local: --local trains without a gradient reduction, so there is nothing to compress; drop one of them", cfg.compress)
	}
	return cfg, nil
}
