// Package workload builds what the training examples train, from their
// common flags: the model (an MLP on a synthetic classification set, or a
// character-level GPT on text), the data each rank reads at each step,
// and the optimizer; and their main function.
package workload

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// Config is the flags every training example takes.
type Config struct {
	Model    string // mlp or gpt
	Steps    int
	Batch    int // global batch
	Accum    int
	LR       float64
	Momentum float64
	Optim    string // sgd or adamw
	Seed     uint64
	Data     string
	Examples int // synthetic set size
	Hidden   string
	Layers   int
	Heads    int
	Dim      int
	Context  int
	Dropout  float64
	MaxBytes int
}

// DefaultConfig is the 784-1024-1024-10 MLP with SGD and momentum,
// batch 64.
func DefaultConfig() Config {
	return Config{Model: "mlp", Steps: 20, Batch: 64, Accum: 1, LR: 0.05, Momentum: 0.9, Optim: "sgd",
		Seed: 1, Examples: 8192, Hidden: "1024,1024", Layers: 2, Heads: 4, Dim: 128, Context: 64, MaxBytes: 4 << 20}
}

// Register adds the flags to fs, with c's values as defaults.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Model, "model", c.Model, "mlp (784-in classifier on a synthetic set) or gpt (character-level, on --data)")
	fs.IntVar(&c.Steps, "steps", c.Steps, "optimizer steps")
	fs.IntVar(&c.Batch, "batch", c.Batch, "global batch: each data-parallel rank gets batch/ranks")
	fs.IntVar(&c.Accum, "accum", c.Accum, "micro-batches per step (gradient accumulation)")
	fs.Float64Var(&c.LR, "lr", c.LR, "learning rate")
	fs.Float64Var(&c.Momentum, "momentum", c.Momentum, "SGD momentum")
	fs.StringVar(&c.Optim, "optim", c.Optim, "sgd or adamw")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the initial weights, the data order and dropout")
	fs.StringVar(&c.Data, "data", c.Data, "gpt: text files or directories, or a nanoGPT .bin token file (default: the Go distribution's source)")
	fs.IntVar(&c.Examples, "examples", c.Examples, "mlp: size of the synthetic set")
	fs.StringVar(&c.Hidden, "hidden", c.Hidden, "mlp: hidden layer sizes")
	fs.IntVar(&c.Layers, "layers", c.Layers, "gpt: transformer blocks")
	fs.IntVar(&c.Heads, "heads", c.Heads, "gpt: attention heads")
	fs.IntVar(&c.Dim, "dim", c.Dim, "gpt: embedding dimension")
	fs.IntVar(&c.Context, "context", c.Context, "gpt: tokens per sequence")
	fs.Float64Var(&c.Dropout, "dropout", c.Dropout, "gpt: dropout probability")
	fs.IntVar(&c.MaxBytes, "max-bytes", c.MaxBytes, "gpt: read at most this much text (0: all)")
}

// Parse parses args with fs, on which Register and the program's own
// flags are defined, as the training examples do: usage goes to stderr
// for --help only (which returns flag.ErrHelp), a mistake is an error that
// says --help lists the flags, and an argument that is not a flag is an
// error.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		fs.SetOutput(os.Stderr)
		if err == flag.ErrHelp {
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w (--help lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every option is a flag (--help lists them)", fs.Arg(0))
	}
	return nil
}

// Validate checks the flags that need no data to check.
func (c *Config) Validate(replicas int) error {
	switch {
	case c.Model != "mlp" && c.Model != "gpt":
		return fmt.Errorf("--model %q: want mlp or gpt", c.Model)
	case c.Optim != "sgd" && c.Optim != "adamw":
		return fmt.Errorf("--optim %q: want sgd or adamw", c.Optim)
	case c.Steps < 0:
		return fmt.Errorf("--steps %d: want 0 or more", c.Steps)
	case c.Accum < 1:
		return fmt.Errorf("--accum %d: want 1 or more", c.Accum)
	case c.Batch < 1 || c.Batch%(replicas*c.Accum) != 0:
		return fmt.Errorf("--batch %d does not split into %d ranks x %d micro-batches: pass a multiple of %d", c.Batch, replicas, c.Accum, replicas*c.Accum)
	case c.LR <= 0:
		return fmt.Errorf("--lr %g: want a positive rate", c.LR)
	}
	return nil
}

// hidden parses --hidden.
func (c *Config) hidden() ([]int, error) {
	var out []int
	for _, f := range strings.Split(c.Hidden, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 {
			return nil, fmt.Errorf("--hidden %q: want sizes such as 1024,1024", c.Hidden)
		}
		out = append(out, n)
	}
	return out, nil
}

// Workload is one data-parallel rank's model and data.
type Workload struct {
	Model   nn.Model
	Sampler *data.Sampler
	Streams map[string]*nn.Stream
	cfg     Config
	rank    int
	reps    int
	gptNet  *nn.GPT
	fill    func(idx []int, b *nn.Batch) error
	micro   []*nn.Batch
}

// New builds the workload of data-parallel rank `rank` of `replicas`.
func New(cfg Config, rank, replicas int) (*Workload, error) {
	if err := cfg.Validate(replicas); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, Streams: map[string]*nn.Stream{}, rank: rank, reps: replicas}
	var n int
	var err error
	if cfg.Model == "mlp" {
		n, err = w.mlp()
	} else {
		n, err = w.gpt()
	}
	if err != nil {
		return nil, err
	}
	if w.Sampler, err = data.NewSampler(n, cfg.Batch, rank, replicas, cfg.Seed, true); err != nil {
		return nil, err
	}
	for range cfg.Accum {
		w.micro = append(w.micro, &nn.Batch{})
	}
	return w, nil
}

// Batches returns this rank's micro-batches of the step; they are reused
// by the next call. It also sets the step's dropout stream, which depends
// on the seed, the step and the rank only, so that a resumed job drops
// what an uninterrupted one would.
func (w *Workload) Batches(step int) ([]*nn.Batch, error) {
	if w.gptNet != nil {
		w.gptNet.SetDropoutStream(nn.NewStream(w.cfg.Seed, "dropout", step*w.reps+w.rank))
	}
	for i, b := range w.micro {
		idx, err := w.Sampler.Micro(step, w.cfg.Accum, i)
		if err != nil {
			return nil, err
		}
		if err := w.fill(idx, b); err != nil {
			return nil, err
		}
	}
	return w.micro, nil
}

// Optimizer returns the configured optimizer over [lo, hi).
func (w *Workload) Optimizer(params []*nn.Param, lo, hi int) (nn.Optimizer, error) {
	if w.cfg.Optim == "adamw" {
		c := nn.DefaultAdamW()
		c.LR = float32(w.cfg.LR)
		return nn.NewAdamW(c, params, lo, hi)
	}
	return nn.NewSGD(nn.SGDConfig{LR: float32(w.cfg.LR), Momentum: float32(w.cfg.Momentum)}, params, lo, hi)
}

// Main is the main function of a training example called name: it parses
// the command line with parse, runs run until SIGINT or SIGTERM ends its
// context, and on an error prints it, prefixed with the name unless it
// says it already, and exits 1. --help prints the flags and exits 0.
func Main[C any](name string, parse func(*flag.FlagSet, []string) (C, error), run func(context.Context, C, io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parse(flag.NewFlagSet(os.Args[0], flag.ContinueOnError), os.Args[1:])
	if err == nil {
		err = run(ctx, cfg, os.Stdout)
	}
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, name+": ") { // a driver's errors may say it already
			msg = name + ": " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		stop()
		os.Exit(1)
	}
}
