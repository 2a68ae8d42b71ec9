// Command collbench measures the collectives of package prims the way
// nccl-tests measures NCCL's: for each size from -b to -e (growing by -f)
// it times -n calls after -w warm-up calls, and rank 0 prints one line per
// size with the time, the algorithm bandwidth (bytes/time) and the bus
// bandwidth (algbw times the nccl-tests factor of the collective, which
// makes the figures comparable across rank counts and with the link speed).
//
//	gorun -np 4 ./examples/collbench -b 8 -e 64M -f 2 --op allreduce
//	gorun -np 8 ./examples/collbench --op all -c 1
//	gorun -np 4 ./examples/collbench --op broadcast --algo ring
//
// The time of one size is the mean over the iterations of the slowest
// rank's time. -c 1 checks every result against a reference computed
// locally from deterministic per-rank inputs and counts the wrong elements
// over all ranks; collbench then exits 1 if any was wrong.
//
// --algo takes a list to compare algorithms: each size then runs every
// algorithm of the list in turn, -r times (each time -n calls), and prints
// a line per algorithm with the median of its -r times. On a shared or
// noisy machine that compares the algorithms under the same conditions,
// where separate runs of each can catch the machine fast for one and slow
// for the next:
//
//	gorun -np 4 ./examples/collbench --op allreduce --algo ring,shared,auto -r 5
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err == nil {
		err = run(ctx, cfg, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "collbench:", err)
		os.Exit(1)
	}
}

// config is what the flags asked for.
type config struct {
	minBytes, maxBytes int
	factor             int
	iters, warmup      int
	check              bool
	ops                []string
	algos              []string // "" for prims.Choose
	rounds             int
	typ                string
	redop              string
}

// opNames lists the collectives collbench runs, in the order --op all runs them.
var opNames = []string{"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall", "gather", "scatter"}

// bareCheck lets -c stand alone, as in collbench -c, meaning -c 1; -c 0
// and -c 1 (nccl-tests' spelling) keep their value.
func bareCheck(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for i, a := range args {
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if a != "-c" && a != "--c" {
			continue
		}
		if i+1 == len(args) || strings.HasPrefix(args[i+1], "-") {
			out = append(out, "1")
		}
	}
	return out
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var cfg config
	minB := fs.String("b", "8", "smallest size in bytes (K, M, G suffixes: 1K = 1024)")
	maxB := fs.String("e", "64M", "largest size in bytes")
	fs.IntVar(&cfg.factor, "f", 2, "factor between sizes")
	fs.IntVar(&cfg.iters, "n", 20, "timed iterations per size")
	fs.IntVar(&cfg.warmup, "w", 5, "warm-up iterations per size")
	checkN := fs.Int("c", 0, "1 (or -c alone): check every result and count the wrong elements")
	op := fs.String("op", "allreduce", "collective: "+strings.Join(opNames, ", ")+", or all")
	algo := fs.String("algo", "", "force an algorithm (ring, tree, recdbl, rabenseifner, hier, linear, shared), or compare several: a comma-separated list, auto for the model's choice (prims.Choose); default: the model's choice")
	fs.IntVar(&cfg.rounds, "r", 1, "rounds: times each size runs every algorithm in turn, -n calls each; the median counts")
	fs.StringVar(&cfg.typ, "type", "float32", "element type: float32, float64, int32, int64, uint8")
	fs.StringVar(&cfg.redop, "redop", "sum", "reduction: sum, prod, max, min")
	if err := fs.Parse(bareCheck(args)); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: collbench takes only flags (see -h)", fs.Arg(0))
	}
	var err error
	if cfg.minBytes, err = spmd.ParseSize(*minB); err != nil {
		return cfg, fmt.Errorf("-b: %w", err)
	}
	if cfg.maxBytes, err = spmd.ParseSize(*maxB); err != nil {
		return cfg, fmt.Errorf("-e: %w", err)
	}
	switch {
	case cfg.minBytes > cfg.maxBytes:
		return cfg, fmt.Errorf("-b %d is larger than -e %d", cfg.minBytes, cfg.maxBytes)
	case cfg.factor < 2:
		return cfg, fmt.Errorf("-f %d: want 2 or more", cfg.factor)
	case cfg.iters < 1 || cfg.warmup < 0:
		return cfg, fmt.Errorf("-n %d -w %d: want at least one iteration and no negative warm-up", cfg.iters, cfg.warmup)
	case cfg.rounds < 1:
		return cfg, fmt.Errorf("-r %d: want at least one round", cfg.rounds)
	case *checkN != 0 && *checkN != 1:
		return cfg, fmt.Errorf("-c %d: want 0 or 1", *checkN)
	}
	cfg.check = *checkN == 1
	if *op == "all" {
		cfg.ops = opNames
	} else {
		for _, o := range strings.Split(*op, ",") {
			if !contains(opNames, o) {
				return cfg, fmt.Errorf("--op %q: want one of %s, or all", o, strings.Join(opNames, ", "))
			}
			cfg.ops = append(cfg.ops, o)
		}
	}
	if cfg.algos, err = parseAlgos(*algo); err != nil {
		return cfg, err
	}
	if !contains([]string{"float32", "float64", "int32", "int64", "uint8"}, cfg.typ) {
		return cfg, fmt.Errorf("--type %q: want float32, float64, int32, int64 or uint8", cfg.typ)
	}
	if !contains([]string{"sum", "prod", "max", "min"}, cfg.redop) {
		return cfg, fmt.Errorf("--redop %q: want sum, prod, max or min", cfg.redop)
	}
	return cfg, nil
}

// parseAlgos parses --algo: one algorithm, or a list of them, each named
// as topo names it or auto (prims.Choose's choice, also the empty list).
func parseAlgos(v string) ([]string, error) {
	if v == "" {
		return []string{""}, nil
	}
	var algos []string
	for _, a := range strings.Split(v, ",") {
		if a == "auto" {
			a = ""
		} else if _, err := topo.ParseAlgo(a); err != nil {
			return nil, fmt.Errorf("--algo %q: %w", v, err)
		}
		if contains(algos, a) {
			return nil, fmt.Errorf("--algo %q: %s is listed twice", v, cmp.Or(a, "auto"))
		}
		algos = append(algos, a)
	}
	return algos, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
