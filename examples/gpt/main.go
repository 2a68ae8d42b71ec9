// Command gpt trains a nanoGPT-sized decoder on the Go distribution's
// source (byte-level; --data for other text, or a nanoGPT .bin token
// file, read as examples/ddp reads it) with any mix of tensor, pipeline and data
// parallelism (strategies/hybrid): Megatron's TP x PP x DP mesh, the
// GPipe, 1F1B and interleaved schedules, sequence parallelism, and DDP or
// ZeRO across the data-parallel groups.
//
//	gorun -np 8 ./examples/gpt --tp 2 --pp 2 --dp 2 --microbatches 4
//	gorun -np 4 ./examples/gpt --pp 4 --schedule interleaved --virtual 2 --layers 8 --microbatches 8
//	gorun -np 4 ./examples/gpt --tp 2 --seq-parallel --zero 1
//	gorun -np 8 ./examples/gpt --plan --mem-limit 512M   # rank the layouts, train nothing
//	./examples/gpt --print-schedule --pp 4 --microbatches 8 --schedule 1f1b
//	gorun -np 2 ./examples/gpt --tp 2 --ckpt ckpt --steps 100          # a sharded checkpoint
//	gorun -np 2 ./examples/gpt --tp 2 --ckpt ckpt --resume --steps 200 # go on from it, on the same mesh
//
// Rank 0 prints "step N loss L tokens/s S" after each step (N from 1, the
// loss to 4 decimals, S the step's --batch x --block tokens over its
// time) and "final loss L" at the end. With --stats the first rank of
// each pipeline stage then prints
//
//	stage S in-flight K activations B bubble X% (formula Y%, simulated Z%): idle share of ...
//
// the most micro-batches it held at once, the bytes of their activations
// and the share of the steps (after the first) it spent idle, out of the
// slowest stage's span: per step, the time from a stage's start of the
// schedule to its last operation's end, on its own clock (goprof report's
// bubble spans from the first stage's start to the last stage's end of
// the schedule, and so reads a little higher), against
// the schedule's formula for stages of equal cost, and against the
// schedule simulated with each chunk's measured mean forward and
// backward times (pipe.Simulate), which counts stages of unequal cost.
//
// Before it allocates anything, gpt estimates what its most loaded rank
// will hold (--plan's memory model: parameters, gradients, AdamW's state
// and the activations in flight) and refuses, on every rank, a
// configuration that needs more than a rank's share of its host's
// available memory (MemAvailable, or its cgroup's limit if lower, over
// the host's ranks), naming the flags to lower. The model counts less
// than a run holds, so a configuration it lets through may still not fit.
//
// With --ckpt every rank writes what it owns to a sharded checkpoint
// (strategies/hybrid's Engine.Save) at the end and every --ckpt-every
// steps; --resume goes on from it, printing the same step lines as a run
// that never stopped. It loads only on the mesh (--tp, --pp, --dp,
// --zero, --virtual) and model it was saved with: resharding a checkpoint
// for another mesh is not supported (Megatron needs a conversion tool
// for it too). With a --compress that keeps state (topk, randk, sign,
// qsgd, powersgd) each rank saves its codec's state too, and a resume
// must pass the same --compress; one from a checkpoint saved without it
// starts the residuals at zero, after a note. Resumed from a checkpoint
// at or past --steps, it trains nothing and says so.
package main

import (
	"flag"
	"fmt"
	"math"

	"github.com/gorun-hpc/gorun/compress"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

func main() { workload.Main("gpt", parseFlags, run) }

// about is what --help says before the flags.
const about = `gpt trains a GPT on the Go source with tensor, pipeline and data parallelism
(strategies/hybrid): --tp x --pp x --dp ranks, --dp by default the ranks left.

  gorun -np N ./examples/gpt [flags]`

// defaultBatch is --batch's default, which globalBatch adapts to the
// mesh.
const defaultBatch = 16

// config is the flags.
type config struct {
	layers, heads, embd, block, vocab int
	dropout                           float64

	tp, pp, dp, zero, micro, virtual int
	schedule                         string
	seqParallel                      bool

	batch, steps int
	batchSet     bool // --batch was given: it is not adapted to the mesh
	lr           float64
	seed         uint64
	maxBytes     int
	data         string

	compress                   string
	printSchedule, plan, stats bool
	memLimit                   string
	top                        int

	ckpt      string
	ckptEvery int
	flags     []string // every flag's value (workload.FlagValues), for the ranks to compare
	resume    bool
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	fs.IntVar(&c.layers, "layers", 4, "transformer blocks")
	fs.IntVar(&c.heads, "heads", 4, "attention heads (they divide --embd, and --tp divides them)")
	fs.IntVar(&c.embd, "embd", 128, "embedding width")
	fs.IntVar(&c.block, "block", 64, "tokens per sequence (the context)")
	// examples/ddp, zero and ps name the same GPT's shape --dim and --context.
	fs.IntVar(&c.embd, "dim", 128, "the same as --embd")
	fs.IntVar(&c.block, "context", 64, "the same as --block")
	fs.IntVar(&c.vocab, "vocab", 0, "vocabulary size: 0 for the corpus's own (about 100 bytes); a larger one pads the tables, as nanoGPT pads 50257 to 50304")
	fs.Float64Var(&c.dropout, "dropout", 0, "dropout probability")
	fs.IntVar(&c.tp, "tp", 1, "tensor-parallel size (ranks that split each layer)")
	fs.IntVar(&c.pp, "pp", 1, "pipeline stages")
	fs.IntVar(&c.dp, "dp", 0, "data-parallel replicas (0: the ranks left, size/(tp*pp))")
	fs.IntVar(&c.zero, "zero", 0, "ZeRO stage across the replicas: 0 (DDP), 1, or with --pp 1 also 2 and 3")
	fs.IntVar(&c.micro, "microbatches", 4, "micro-batches per step")
	fs.StringVar(&c.schedule, "schedule", pipe.NameOneFOneB, "pipeline schedule: gpipe, 1f1b or interleaved")
	fs.IntVar(&c.virtual, "virtual", 1, "interleaved: model chunks per stage (1 or more; the other schedules take 1)")
	fs.BoolVar(&c.seqParallel, "seq-parallel", false, "Megatron's sequence parallelism (needs --tp 2 or more)")
	fs.IntVar(&c.batch, "batch", defaultBatch, fmt.Sprintf("sequences per step, over all replicas; left out, %d rounded down to a multiple of replicas x --microbatches, or that product where it is more (after a note)", defaultBatch))
	fs.IntVar(&c.steps, "steps", 20, "optimizer steps")
	fs.Float64Var(&c.lr, "lr", 1e-3, "AdamW's learning rate")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the weights, the data order and dropout")
	fs.IntVar(&c.maxBytes, "max-bytes", 4<<20, "read at most this much text (0: all); a .bin token file is read whole")
	fs.StringVar(&c.data, "data", "", "text files or directories to train on instead of the Go source, or a nanoGPT .bin token file (uint16 ids, as examples/ddp reads)")
	fs.StringVar(&c.compress, "compress", "none", "compress the gradients' averaging over the replicas (any --zero): none, "+compress.Names)
	fs.BoolVar(&c.printSchedule, "print-schedule", false, "print the pipeline's schedule as a table of time slots by stage and exit")
	fs.BoolVar(&c.plan, "plan", false, "rank the layouts of this job by modelled step time among those that fit --mem-limit, print the table and exit")
	fs.StringVar(&c.memLimit, "mem-limit", "0", "--plan: memory per rank (K, M, G suffixes; 0: no limit)")
	fs.IntVar(&c.top, "top", 20, "--plan: rows of the table")
	fs.StringVar(&c.ckpt, "ckpt", "", "directory of the sharded checkpoint: every rank writes what it owns at the end (and every --ckpt-every steps)")
	fs.IntVar(&c.ckptEvery, "ckpt-every", 0, "also save every N steps (0: only at the end)")
	fs.BoolVar(&c.resume, "resume", false, "continue from --ckpt's checkpoint, saved on the same mesh and model; under gorun --max-restarts, start afresh when there is none yet")
	fs.BoolVar(&c.stats, "stats", false, "at the end, each stage prints its micro-batches in flight, activation bytes and measured bubble")
	if err := workload.Parse(fs, args, about); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) { c.batchSet = c.batchSet || f.Name == "batch" })
	c.flags = workload.FlagValues(fs)
	if err := c.check(); err != nil {
		return c, err
	}
	if _, err := compress.Parse(c.compress, c.seed); err != nil {
		return c, fmt.Errorf("--compress: %w", err)
	}
	if _, err := spmd.ParseSize(c.memLimit); err != nil {
		return c, fmt.Errorf("--mem-limit %q: %w", c.memLimit, err)
	}
	return c, nil
}

// check checks the flags that need no data and no job to check, in the
// flags' own words, before strategies/hybrid checks the configuration they
// make.
func (c config) check() error {
	switch {
	case c.steps < 1:
		return fmt.Errorf("--steps %d: pass 1 or more", c.steps)
	case c.batch < 1:
		return fmt.Errorf("--batch %d: pass at least 1", c.batch)
	case c.vocab < 0:
		return fmt.Errorf("--vocab %d: pass 0 or a size", c.vocab)
	case !(c.lr > 0):
		return fmt.Errorf("--lr %g: want a positive rate", c.lr)
	case math.IsInf(float64(float32(c.lr)), 0) || float32(c.lr) == 0:
		return fmt.Errorf("--lr %g: want a positive rate that float32, the model's type, holds (about 1.4e-45 to 3.4e38)", c.lr)
	case c.layers < 1:
		return fmt.Errorf("--layers %d: pass 1 or more", c.layers)
	case c.heads < 1:
		return fmt.Errorf("--heads %d: pass 1 or more", c.heads)
	case c.embd < 1:
		return fmt.Errorf("--embd %d: pass a width of 1 or more", c.embd)
	case c.embd%c.heads != 0:
		return fmt.Errorf("--embd %d does not divide into --heads %d: pass heads that divide the width", c.embd, c.heads)
	case c.block < 1:
		return fmt.Errorf("--block %d: pass a context of 1 token or more", c.block)
	case !(c.dropout >= 0 && c.dropout < 1):
		return fmt.Errorf("--dropout %g: pass a probability in [0, 1)", c.dropout)
	case c.tp < 1:
		return fmt.Errorf("--tp %d: pass 1 or more", c.tp)
	case c.pp < 1:
		return fmt.Errorf("--pp %d: pass 1 or more", c.pp)
	case c.dp < 0:
		return fmt.Errorf("--dp %d: pass 1 or more, or 0 for the ranks left", c.dp)
	case c.zero < 0 || c.zero > 3:
		return fmt.Errorf("--zero %d: want 0, 1, 2 or 3", c.zero)
	case c.micro < 1:
		return fmt.Errorf("--microbatches %d: pass 1 or more", c.micro)
	case c.virtual < 1:
		return fmt.Errorf("--virtual %d: pass 1 or more chunks per stage", c.virtual)
	case c.resume && c.ckpt == "":
		return fmt.Errorf("--resume needs --ckpt DIR, the directory to resume from")
	case c.ckptEvery < 0:
		return fmt.Errorf("--ckpt-every %d: want 0 or more", c.ckptEvery)
	case c.ckptEvery > 0 && c.ckpt == "":
		return fmt.Errorf("--ckpt-every %d needs --ckpt DIR, the directory to save to", c.ckptEvery)
	}
	return nil
}

// checkMesh says whether --tp x --pp x --dp fits a job of size ranks.
func (c config) checkMesh(size int) error {
	tp, pp := c.tp, c.pp
	switch {
	case c.dp == 0 && size%(tp*pp) != 0:
		verb := "are"
		if size == 1 {
			verb = "is"
		}
		return fmt.Errorf("%s %s not a multiple of --tp %d x --pp %d = %d: pick sizes whose product divides the ranks, or run a multiple of %d ranks", ranks(size), verb, tp, pp, tp*pp, tp*pp)
	case c.dp > 0 && tp*pp*c.dp != size:
		return fmt.Errorf("--tp %d x --pp %d x --dp %d = %d, but the job has %s: pick sizes whose product is the number of ranks, or leave --dp out", tp, pp, c.dp, tp*pp*c.dp, ranks(size))
	}
	return nil
}

// globalBatch is the batch of a step over dp replicas, each cutting its
// share into --microbatches: --batch as given, which must split, or
// left out, defaultBatch made to split (workload.RoundBatch), as
// examples/ddp's default is; with the note to print when that grew past
// defaultBatch, or "".
func (c config) globalBatch(dp int) (batch int, note string, err error) {
	unit := dp * c.micro
	if !c.batchSet {
		b := workload.RoundBatch(defaultBatch, unit)
		return b, workload.GrownNote(defaultBatch, unit, replicas(dp)+" x "+microBatches(c.micro)), nil
	}
	if c.batch%unit != 0 {
		return 0, "", fmt.Errorf("--batch %d does not split into %s x %s: pass a multiple of %d, replicas x micro-batches",
			c.batch, replicas(dp), microBatches(c.micro), unit)
	}
	return c.batch, "", nil
}

// replicas says "1 replica" or "N replicas".
func replicas(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

// microBatches says "1 micro-batch" or "N micro-batches".
func microBatches(n int) string {
	if n == 1 {
		return "1 micro-batch"
	}
	return fmt.Sprintf("%d micro-batches", n)
}

// ranks says "1 rank" or "N ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
