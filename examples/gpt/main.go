// Command gpt trains a nanoGPT-sized decoder on the Go distribution's
// source (byte-level) with any mix of tensor, pipeline and data
// parallelism (strategies/hybrid): Megatron's TP x PP x DP mesh, the
// GPipe, 1F1B and interleaved schedules, sequence parallelism, and DDP or
// ZeRO across the data-parallel groups.
//
//	gorun -np 8 ./examples/gpt --tp 2 --pp 2 --dp 2 --microbatches 4
//	gorun -np 4 ./examples/gpt --pp 4 --schedule interleaved --virtual 2 --layers 8 --microbatches 8
//	gorun -np 4 ./examples/gpt --tp 2 --seq-parallel --zero 1
//	gorun -np 8 ./examples/gpt --plan --mem-limit 512M   # rank the layouts, train nothing
//	./examples/gpt --print-schedule --pp 4 --microbatches 8 --schedule 1f1b
//
// Rank 0 prints "step N loss L tokens/s S" after each step (N from 1, the
// loss to 4 decimals, S the step's --batch x --block tokens over its
// time) and "final loss L" at the end. With --stats the first rank of
// each pipeline stage then prints
//
//	stage S in-flight K activations B bubble X% (formula Y%, simulated Z%)
//
// the most micro-batches it held at once, the bytes of their activations
// and the share of the steps (after the first) it spent idle, against
// the schedule's formula for stages of equal cost, and against the
// schedule simulated with each chunk's measured mean forward and
// backward times (pipe.Simulate), which counts stages of unequal cost.
package main

import (
	"flag"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

func main() { workload.Main("gpt", parseFlags, run) }

// config is the flags.
type config struct {
	layers, heads, embd, block, vocab int
	dropout                           float64

	tp, pp, dp, zero, micro, virtual int
	schedule                         string
	seqParallel                      bool

	batch, steps int
	lr           float64
	seed         uint64
	maxBytes     int
	data         string

	compress                   string
	printSchedule, plan, stats bool
	memLimit                   string
	top                        int
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	fs.IntVar(&c.layers, "layers", 4, "transformer blocks")
	fs.IntVar(&c.heads, "heads", 4, "attention heads (they divide --embd, and --tp divides them)")
	fs.IntVar(&c.embd, "embd", 128, "embedding width")
	fs.IntVar(&c.block, "block", 64, "tokens per sequence (the context)")
	fs.IntVar(&c.vocab, "vocab", 0, "vocabulary size: 0 for the corpus's own (about 100 bytes); a larger one pads the tables, as nanoGPT pads 50257 to 50304")
	fs.Float64Var(&c.dropout, "dropout", 0, "dropout probability")
	fs.IntVar(&c.tp, "tp", 1, "tensor-parallel size (ranks that split each layer)")
	fs.IntVar(&c.pp, "pp", 1, "pipeline stages")
	fs.IntVar(&c.dp, "dp", 0, "data-parallel replicas (0: the ranks left, size/(tp*pp))")
	fs.IntVar(&c.zero, "zero", 0, "ZeRO stage across the replicas: 0 (DDP), 1, or with --pp 1 also 2 and 3")
	fs.IntVar(&c.micro, "microbatches", 4, "micro-batches per step")
	fs.StringVar(&c.schedule, "schedule", pipe.NameOneFOneB, "pipeline schedule: gpipe, 1f1b or interleaved")
	fs.IntVar(&c.virtual, "virtual", 1, "interleaved: model chunks per stage")
	fs.BoolVar(&c.seqParallel, "seq-parallel", false, "Megatron's sequence parallelism (needs --tp 2 or more)")
	fs.IntVar(&c.batch, "batch", 16, "sequences per step, over all replicas")
	fs.IntVar(&c.steps, "steps", 20, "optimizer steps")
	fs.Float64Var(&c.lr, "lr", 1e-3, "AdamW's learning rate")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the weights, the data order and dropout")
	fs.IntVar(&c.maxBytes, "max-bytes", 4<<20, "read at most this much of the corpus (0: all)")
	fs.StringVar(&c.data, "data", "", "text files or directories to train on instead of the Go source")
	fs.StringVar(&c.compress, "compress", "none", "compress the gradients' averaging over the replicas (any --zero): none, "+compress.Names)
	fs.BoolVar(&c.printSchedule, "print-schedule", false, "print the pipeline's schedule as a table of time slots by stage and exit")
	fs.BoolVar(&c.plan, "plan", false, "rank the layouts of this job by modelled step time among those that fit --mem-limit, print the table and exit")
	fs.StringVar(&c.memLimit, "mem-limit", "0", "--plan: memory per rank (K, M, G suffixes; 0: no limit)")
	fs.IntVar(&c.top, "top", 20, "--plan: rows of the table")
	fs.BoolVar(&c.stats, "stats", false, "at the end, each stage prints its micro-batches in flight, activation bytes and measured bubble")
	if err := workload.Parse(fs, args); err != nil {
		return c, err
	}
	switch {
	case c.steps < 0:
		return c, fmt.Errorf("--steps %d: pass 0 or more", c.steps)
	case c.batch < 1:
		return c, fmt.Errorf("--batch %d: pass at least 1", c.batch)
	case c.vocab < 0:
		return c, fmt.Errorf("--vocab %d: pass 0 or a size", c.vocab)
	}
	if _, err := compress.Parse(c.compress, c.seed); err != nil {
		return c, fmt.Errorf("--compress: %w", err)
	}
	if _, err := spmd.ParseSize(c.memLimit); err != nil {
		return c, fmt.Errorf("--mem-limit %q: %w", c.memLimit, err)
	}
	return c, nil
}
