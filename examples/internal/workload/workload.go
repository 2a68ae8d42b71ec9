// Package workload builds what the training examples train, from their
// common flags: the model (an MLP on a synthetic classification set, or a
// character-level GPT on text), the data each rank reads at each step,
// and the optimizer; and their main function.
package workload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// Config is the flags every training example takes.
type Config struct {
	Model    string // mlp or gpt
	Steps    int
	Batch    int // global batch; 0: DefaultBatch, rounded to split (GlobalBatch)
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

// DefaultBatch is the global batch when Config.Batch is 0, as it is by
// default: rounded down to a multiple of the data-parallel ranks times the
// micro-batches, so that it splits at any number of ranks, or raised to
// that product where it is larger (GlobalBatch; BatchNote says so).
const DefaultBatch = 64

// DefaultConfig is the 784-1024-1024-10 MLP with SGD and momentum,
// batch DefaultBatch.
func DefaultConfig() Config {
	return Config{Model: "mlp", Steps: 20, Accum: 1, LR: 0.05, Momentum: 0.9, Optim: "sgd",
		Seed: 1, Examples: 8192, Hidden: "1024,1024", Layers: 2, Heads: 4, Dim: 128, Context: 64, MaxBytes: 4 << 20}
}

// Register adds the flags to fs, with c's values as defaults.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Model, "model", c.Model, "mlp (784-in classifier on a synthetic set) or gpt (character-level, on --data)")
	fs.IntVar(&c.Steps, "steps", c.Steps, "optimizer steps")
	fs.IntVar(&c.Batch, "batch", c.Batch, fmt.Sprintf("global batch, split evenly over the data-parallel ranks (the workers of ps); 0, the default: %d rounded down to a multiple of ranks x --accum, or ranks x --accum where that is more (after a note)", DefaultBatch))
	fs.IntVar(&c.Accum, "accum", c.Accum, "micro-batches per step (gradient accumulation)")
	fs.Float64Var(&c.LR, "lr", c.LR, "learning rate")
	fs.Float64Var(&c.Momentum, "momentum", c.Momentum, "SGD momentum (0: none)")
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
// error. The usage is a line "Usage of PROGRAM:", about (what the program
// does and how it is run, one or more lines), and the flags.
func Parse(fs *flag.FlagSet, args []string, about string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		fs.SetOutput(os.Stderr)
		if err == flag.ErrHelp {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n%s\n\nFlags:\n", fs.Name(), strings.TrimRight(about, "\n"))
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
	case c.Steps < 1:
		return fmt.Errorf("--steps %d: want 1 or more", c.Steps)
	case c.Accum < 1:
		return fmt.Errorf("--accum %d: want 1 or more", c.Accum)
	case !(c.LR > 0):
		return fmt.Errorf("--lr %g: want a positive rate", c.LR)
	case !finite32(c.LR) || float32(c.LR) == 0:
		return fmt.Errorf("--lr %g: want a positive rate that float32, the model's type, holds (about 1.4e-45 to 3.4e38)", c.LR)
	case !(c.Momentum >= 0):
		return fmt.Errorf("--momentum %g: want 0 (none) or more", c.Momentum)
	case !finite32(c.Momentum):
		return fmt.Errorf("--momentum %g: want a finite momentum that float32, the model's type, holds (at most 3.4e38)", c.Momentum)
	}
	return c.CheckBatch(replicas, "rank")
}

// finite32 says whether v stays finite as the float32 the optimizers
// take (not Inf, nor beyond float32's range).
func finite32(v float64) bool { return !math.IsInf(float64(float32(v)), 0) && !math.IsNaN(v) }

// GlobalBatch is the batch of a step over replicas data-parallel ranks:
// Batch, or where it is 0 DefaultBatch made to split (RoundBatch).
func (c *Config) GlobalBatch(replicas int) int {
	if c.Batch != 0 {
		return c.Batch
	}
	return RoundBatch(DefaultBatch, replicas*max(c.Accum, 1))
}

// RoundBatch is a default global batch def made to split into unit
// parts (data-parallel ranks times micro-batches): def rounded down to a
// multiple of unit, or unit, one sample a part, where def is smaller.
func RoundBatch(def, unit int) int { return max(unit, def/unit*unit) }

// GrownNote is the note a program prints when RoundBatch raised its
// default batch def above itself, to give each of parts (such as "4
// ranks x 32 micro-batches", unit in all) one sample; "" when it did
// not, and the default is what the program's help says.
func GrownNote(def, unit int, parts string) string {
	if unit <= def {
		return ""
	}
	return fmt.Sprintf("note: the default batch of %d does not split into %s: training with batch %d, one a micro-batch (pass --batch to choose)", def, parts, unit)
}

// BatchNote is GrownNote for the default batch over replicas
// data-parallel ranks, which it calls what rank says ("rank", or
// "worker"); "" when Batch was given.
func (c *Config) BatchNote(replicas int, rank string) string {
	if c.Batch != 0 {
		return ""
	}
	accum := max(c.Accum, 1)
	return GrownNote(DefaultBatch, replicas*accum, count(replicas, rank)+" x "+count(accum, "micro-batch"))
}

// CheckBatch says whether the global batch splits evenly over replicas
// data-parallel ranks, each cutting its share into Accum micro-batches;
// its messages call the ranks what rank says ("rank", or "worker").
func (c *Config) CheckBatch(replicas int, rank string) error {
	b, unit := c.GlobalBatch(replicas), replicas*max(c.Accum, 1)
	switch {
	case b < 0:
		return fmt.Errorf("--batch %d: want 1 or more, or 0 (the default) for %d made to split over the %ss x --accum", b, DefaultBatch, rank)
	case b%unit != 0:
		return fmt.Errorf("--batch %d does not split into %s x %s: pass a multiple of %d", b, count(replicas, rank), count(c.Accum, "micro-batch"), unit)
	}
	return nil
}

// count says "1 rank" or "N ranks".
func count(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case strings.HasSuffix(noun, "ch"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
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
	batch   int // global
	gptNet  *nn.GPT
	vocab   int // gpt's
	fill    func(idx []int, b *nn.Batch) error
	micro   []*nn.Batch
}

// New builds the workload of data-parallel rank `rank` of `replicas`.
func New(cfg Config, rank, replicas int) (*Workload, error) {
	if err := cfg.Validate(replicas); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, Streams: map[string]*nn.Stream{}, rank: rank, reps: replicas, batch: cfg.GlobalBatch(replicas)}
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
	if w.Sampler, err = data.NewSampler(n, w.batch, rank, replicas, cfg.Seed, true); err != nil {
		return nil, err
	}
	for range cfg.Accum {
		w.micro = append(w.micro, &nn.Batch{})
	}
	return w, nil
}

// Batch is the global batch: what --batch says, or what its default came
// to at the job's number of data-parallel ranks.
func (w *Workload) Batch() int { return w.batch }

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

// NothingToTrain is what a program resumed from the checkpoint in dir, at
// step, says when that leaves none of its steps to train: a run asked
// for no more steps than were trained already.
func NothingToTrain(dir string, step, steps int) string {
	return fmt.Sprintf("the checkpoint in %s is at step %d, at or past --steps %d: nothing to train; pass a larger --steps to go on", dir, step, steps)
}

// Main is the main function of a training example called name: it parses
// the command line with parse, runs run until SIGINT or SIGTERM ends its
// context, and on an error prints it, each line prefixed with the name
// unless it says it already, and exits 1. --help prints the usage and
// exits 0.
func Main[C any](name string, parse func(*flag.FlagSet, []string) (C, error), run func(context.Context, C, io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mainName = name
	cfg, err := parse(flag.NewFlagSet(os.Args[0], flag.ContinueOnError), os.Args[1:])
	if err == nil {
		err = run(ctx, cfg, os.Stdout)
	}
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		if !errors.As(err, new(said)) {
			fmt.Fprintln(os.Stderr, message(name, err))
		}
		stop()
		os.Exit(1)
	}
}

// mainName is the name Main was given, for Close's message; "" outside
// Main (a test that calls a run function).
var mainName string

// Close closes w, the world of a run function under Main, saying *err
// first when the run fails: its peers lose the rank at the Close and print
// their own errors, and at np 4 those lines came before the one that said
// why (examples/ddp --resume of a checkpoint of another codec). Main does
// not say it again. Use it as defer workload.Close(w, &err), err the run
// function's named result.
func Close(w *spmd.World, err *error) {
	if errors.As(*err, new(heard)) && mainName != "" {
		// Another rank says why (RootSays): this one leaves after it,
		// so that gorun names that rank first, and says nothing.
		*err = said{*err}
		time.Sleep(hearFirst)
	}
	if *err != nil && *err != flag.ErrHelp && mainName != "" && !errors.As(*err, new(said)) {
		fmt.Fprintln(os.Stderr, message(mainName, *err))
		*err = said{*err}
		// gorun reads each rank's stderr on its own: a peer's line
		// written microseconds later could still be forwarded first
		// (1 run in 10 at np 4), a few milliseconds could not.
		time.Sleep(sayFirst)
	}
	w.Close()
}

// sayFirst is how long a failed rank waits between saying why and closing.
const sayFirst = 20 * time.Millisecond

// hearFirst is how long a rank that failed with another's error (heard)
// waits before it closes: past that rank's sayFirst and exit.
const hearFirst = 10 * sayFirst

// said is an error Close has printed.
type said struct{ error }

func (s said) Unwrap() error { return s.error }

// heard is another rank's error, which that rank says (RootSays).
type heard struct{ error }

func (h heard) Unwrap() error { return h.error }

// message is err for people: each of its lines (errors.Join puts one
// error on each) prefixed with "name: ", unless the line says it already.
func message(name string, err error) string {
	lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, name+": ") { // a driver's errors may say it already
			lines[i] = name + ": " + l
		}
	}
	return strings.Join(lines, "\n")
}
