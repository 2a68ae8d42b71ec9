// Command zero trains a model with sharded data parallelism
// (strategies/zero): ZeRO stages 0-3 or FSDP's sharding strategies, in
// fp32 or with bf16 mixed precision, on the models of examples/ddp (the
// 784-1024-1024-10 MLP on a synthetic set, or a character-level GPT).
//
//	gorun -np 4 ./examples/zero --zero 3 --steps 50
//	gorun -np 4 ./examples/zero --shard grad-op --mixed bf16 --model gpt --optim adamw --lr 1e-3
//	gorun -np 4 ./examples/zero --zero 3 --ckpt ckpt --steps 100          # a sharded checkpoint
//	gorun -np 2 ./examples/zero --zero 1 --ckpt ckpt --resume --steps 200 # go on from it at 2 ranks
//	gorun -np 4 ./examples/zero --zero 2 --compress fp16                  # fp16 reduce-scatters
//
// Rank 0 prints one line per step, "step N loss L samples/s S", then
// with --compress "compression NAME sent B bytes a step of R (ratio X)",
// then "final loss L", then one line per rank
//
//	memory rank R params P grads G optim O peak K heap H
//
// with the bytes the rank holds for the model (zero.Memory) and its Go
// heap in use after a collection at the end.
package main

import (
	"flag"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

func main() { workload.Main("zero", parseFlags, run) }

// config is the flags.
type config struct {
	workload.Config
	zero      zero.Config
	compress  string
	ckpt      string
	ckptEvery int
	resume    bool
	ddp       bool
	// crashInSave makes rank 1 die in the middle of that save, for tests.
	crashInSave int
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	cfg := config{Config: workload.DefaultConfig()}
	cfg.Register(fs)
	stage := fs.Int("zero", -1, "ZeRO stage: 0 (DDP), 1 (optimizer state sharded), 2 (and gradients), 3 (and parameters); default 3, or what --shard says")
	shard := fs.String("shard", "", "FSDP's sharding strategy instead of --zero: full (stage 3), grad-op (2), none (0) or hybrid (3 within each host, replicated across hosts)")
	mixed := fs.String("mixed", "none", "bf16: bf16 parameters and gradients, fp32 master weights and optimizer state; none: fp32")
	fs.BoolVar(&cfg.zero.NoPrefetch, "no-prefetch", false, "stage 3: gather each unit when it runs, not while the one before computes")
	fs.StringVar(&cfg.ckpt, "ckpt", "", "directory of the sharded checkpoint: every rank writes its shard at the end (and every --ckpt-every steps)")
	fs.IntVar(&cfg.ckptEvery, "ckpt-every", 0, "also save every N steps (0: only at the end)")
	fs.BoolVar(&cfg.resume, "resume", false, "continue from --ckpt's checkpoint, saved at any number of ranks and any stage")
	fs.IntVar(&cfg.crashInSave, "crash-in-save", 0, "for tests: rank 1 kills itself (SIGKILL) during the N-th save, after writing its shard, before the index is committed")
	fs.StringVar(&cfg.compress, "compress", "none", "compress the gradients' reductions: none, "+compress.Names+" (fp16 and bf16 reduce-scatter in 16 bits; the others all-reduce and keep the rank's chunk)")
	fs.BoolVar(&cfg.ddp, "ddp", false, "for benchmarks: train with strategies/dp's DDP instead, same model and steps")
	if err := workload.Parse(fs, args); err != nil {
		return cfg, err
	}
	switch {
	case *shard != "" && *stage >= 0:
		return cfg, fmt.Errorf("--zero %d and --shard %s both say what to shard: pass one", *stage, *shard)
	case *shard != "":
		if err := zero.Shard(*shard).Apply(&cfg.zero); err != nil {
			return cfg, fmt.Errorf("--shard: %w", err)
		}
	case *stage < 0:
		cfg.zero.Stage = 3
	case *stage > 3:
		return cfg, fmt.Errorf("--zero %d: want 0, 1, 2 or 3", *stage)
	default:
		cfg.zero.Stage = *stage
	}
	switch *mixed {
	case "bf16":
		cfg.zero.Mixed = true
	case "none", "fp32":
	default:
		return cfg, fmt.Errorf("--mixed %q: want bf16 or none", *mixed)
	}
	codec, err := compress.Parse(cfg.compress, cfg.Seed)
	if err != nil {
		return cfg, fmt.Errorf("--compress: %w", err)
	}
	cfg.zero.Compress = codec
	switch {
	case codec != nil && cfg.zero.Mixed:
		return cfg, fmt.Errorf("--compress %s with --mixed bf16: mixed precision reduces bf16 gradients already; drop one of them", cfg.compress)
	case codec != nil && cfg.ddp:
		return cfg, fmt.Errorf("--compress with --ddp: examples/ddp --compress is DDP with compression")
	case cfg.resume && cfg.ckpt == "":
		return cfg, fmt.Errorf("--resume needs --ckpt DIR, the directory to resume from")
	case cfg.ckptEvery < 0:
		return cfg, fmt.Errorf("--ckpt-every %d: want 0 or more", cfg.ckptEvery)
	case cfg.ddp && (cfg.ckpt != "" || cfg.zero.Mixed):
		return cfg, fmt.Errorf("--ddp is for benchmarks: it takes neither --ckpt nor --mixed")
	}
	return cfg, nil
}
