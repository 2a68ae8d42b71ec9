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
// with --compress "compression NAME sent B bytes a step of R (ratio X)"
// (or, where the codec has nothing to do, on one rank or with --shard
// hybrid on one host, "compression NAME had nothing to do (WHY): the
// gradients stayed exact"), then "final loss L", then one line per rank
//
//	memory rank R params P grads G optim O peak K heap H
//
// with the bytes the rank holds for the model (zero.Memory) and its Go
// heap in use after a collection at the end. Resumed from a checkpoint at
// or past --steps, it trains nothing and says so, with none of these lines.
package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

func main() { workload.Main("zero", parseFlags, run) }

// about is what --help says before the flags.
const about = `zero trains a model with sharded data parallelism (strategies/zero): ZeRO
stages 0-3 or FSDP's sharding strategies, in fp32 or bf16 mixed precision.

  gorun -np N ./examples/zero [flags]`

// config is the flags.
type config struct {
	workload.Config
	zero      zero.Config
	compress  string
	ckpt      string
	ckptEvery int
	resume    bool
	ddp       bool
	// crashInSave makes rank 1 die in the middle of that save, for tests,
	// on the job's first start only.
	crashInSave int
	flags       []string // every flag's value (workload.FlagValues), for the ranks to compare
}

// stageFlag is --zero, which remembers whether it was given: when it was
// not, the stage is --shard's, or 3.
type stageFlag struct {
	stage int
	set   bool
}

func (f *stageFlag) String() string {
	if f == nil || !f.set {
		return "" // --help shows no default
	}
	return strconv.Itoa(f.stage)
}

func (f *stageFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("want 0, 1, 2 or 3")
	}
	f.stage, f.set = n, true
	return nil
}

// ddpIgnores lists the flags given on fs ("--zero 2") that --ddp, which
// trains strategies/dp's DDP instead, would ignore.
func ddpIgnores(fs *flag.FlagSet) []string {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "mixed" && f.Value.String() != "bf16": // none: DDP's fp32
		case f.Name == "no-prefetch" || f.Name == "resume":
			given = append(given, "--"+f.Name)
		case f.Name == "zero" || f.Name == "shard" || f.Name == "mixed" || f.Name == "ckpt" || f.Name == "ckpt-every":
			given = append(given, "--"+f.Name+" "+f.Value.String())
		}
	})
	return given
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	cfg := config{Config: workload.DefaultConfig()}
	cfg.Register(fs)
	var stage stageFlag
	fs.Var(&stage, "zero", "ZeRO `stage`: 0 (DDP), 1 (optimizer state sharded), 2 (and gradients), 3 (and parameters); when neither --zero nor --shard is given, 3")
	shard := fs.String("shard", "", "FSDP's sharding strategy instead of --zero: full (stage 3), grad-op (2), none (0) or hybrid (3 within each host, replicated across hosts)")
	mixed := fs.String("mixed", "none", "bf16: bf16 parameters and gradients, fp32 master weights and optimizer state; none: fp32")
	fs.BoolVar(&cfg.zero.NoPrefetch, "no-prefetch", false, "stage 3: gather each unit when it runs, not while the one before computes")
	fs.StringVar(&cfg.ckpt, "ckpt", "", "directory of the sharded checkpoint: every rank writes its shard at the end (and every --ckpt-every steps)")
	fs.IntVar(&cfg.ckptEvery, "ckpt-every", 0, "also save every N steps (0: only at the end)")
	fs.BoolVar(&cfg.resume, "resume", false, "continue from --ckpt's checkpoint, saved at any number of ranks and any stage")
	fs.IntVar(&cfg.crashInSave, "crash-in-save", 0, "for tests of restarts: rank 1 kills itself (SIGKILL) during the N-th save, after writing its shard, before the index is committed, on the job's first start only")
	fs.StringVar(&cfg.compress, "compress", "none", "compress the gradients' reductions: none, "+compress.Names+" (fp16 and bf16 reduce-scatter in 16 bits; the others all-reduce and keep the rank's chunk)")
	fs.BoolVar(&cfg.ddp, "ddp", false, "for benchmarks: train with strategies/dp's DDP instead, same model and steps")
	if err := workload.Parse(fs, args, about); err != nil {
		return cfg, err
	}
	cfg.flags = workload.FlagValues(fs)
	switch {
	case stage.set && (stage.stage < 0 || stage.stage > 3):
		return cfg, fmt.Errorf("--zero %d: want 0, 1, 2 or 3", stage.stage)
	case *shard != "" && stage.set:
		return cfg, fmt.Errorf("--zero %d and --shard %s both say what to shard: pass one", stage.stage, *shard)
	case *shard != "":
		if err := zero.Shard(*shard).Apply(&cfg.zero); err != nil {
			return cfg, fmt.Errorf("--shard: %w", err)
		}
	case !stage.set:
		cfg.zero.Stage = 3
	default:
		cfg.zero.Stage = stage.stage
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
	case cfg.ckptEvery > 0 && cfg.ckpt == "":
		return cfg, fmt.Errorf("--ckpt-every %d needs --ckpt DIR, the directory to save to", cfg.ckptEvery)
	case cfg.crashInSave < 0:
		return cfg, fmt.Errorf("--crash-in-save %d: want a save, 1 or more", cfg.crashInSave)
	case cfg.ddp:
		if given := ddpIgnores(fs); len(given) > 0 {
			return cfg, fmt.Errorf("--ddp with %s: --ddp trains strategies/dp's DDP, for benchmarks, which takes none of --zero, --shard, --no-prefetch, --mixed and --ckpt: drop %s",
				strings.Join(given, ", "), strings.Join(given, ", "))
		}
	case cfg.zero.NoPrefetch && cfg.zero.Stage != 3:
		return cfg, fmt.Errorf("--no-prefetch applies to stage 3 only (it stops gathering a unit's parameters while the one before computes), not to stage %d: drop it, or pass --zero 3", cfg.zero.Stage)
	}
	return cfg, nil
}
