// Command curves draws training runs' loss curves as one SVG line chart,
// for comparing gradient codecs (or anything else) on the same workload,
// and prints a table of each run's final loss against the first run's.
//
//	curves -o bench/out/curves.svg -title "MLP, np 4" \
//		none=bench/out/c-none.txt fp16=bench/out/c-fp16.txt topk:0.01=bench/out/c-topk.txt
//
// Each argument is NAME=PATH, PATH the stdout of examples/ddp ("step N loss
// L samples/s S") or of examples/gpt ("step N loss L tokens/s S"), N from 1
// in both; other lines are ignored. A step number that does not go up
// (a run resumed from a checkpoint) drops the steps from it on, so the
// curve follows the run that went on. Flags come before the arguments.
//
// The table goes to stderr, or with -table to stdout (then -o is needed).
// With -smooth K both the curves and the final losses are the mean of the
// last K steps.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// errArg is an argument that is not NAME=PATH.
var errArg = errors.New("want NAME=PATH, e.g. none=bench/out/c-none.txt")

// options are the flags.
type options struct {
	out    string
	title  string
	smooth int
	table  bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "curves:", err)
		os.Exit(1)
	}
}

// run is the program: args are those after the command's name.
func run(args []string, stdout, stderr io.Writer) error {
	opt, rest, err := parseFlags(args, stdout, stderr)
	if err != nil || rest == nil {
		return err
	}
	all, err := readAll(rest)
	if err != nil {
		return err
	}
	for i := range all {
		all[i].pts = smooth(all[i].pts, opt.smooth)
	}
	tw := stderr
	if opt.table {
		tw = stdout
	}
	table(tw, all, opt.smooth)
	var svg bytes.Buffer
	chart(&svg, opt.title, all, opt.smooth)
	if opt.out == "" {
		_, err := stdout.Write(svg.Bytes())
		return err
	}
	return os.WriteFile(opt.out, svg.Bytes(), 0o644)
}

// parseFlags returns the options and the NAME=PATH arguments; both nil
// after -h, which prints the usage to stdout.
func parseFlags(args []string, stdout, stderr io.Writer) (options, []string, error) {
	var opt options
	fs := flag.NewFlagSet("curves", flag.ContinueOnError)
	fs.StringVar(&opt.out, "o", "", "write the SVG to `FILE` (default stdout)")
	fs.StringVar(&opt.title, "title", "training loss", "the chart's `TEXT`")
	fs.IntVar(&opt.smooth, "smooth", 1, "plot the moving average over `K` steps (1: none)")
	fs.BoolVar(&opt.table, "table", false, "print the table to stdout instead of stderr")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: curves [flags] NAME=PATH...")
		fs.PrintDefaults()
	}
	fs.SetOutput(io.Discard) // the error goes back to main, which prints it once
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return opt, nil, nil
		}
		fs.SetOutput(stderr)
		fs.Usage()
		return opt, nil, err
	}
	switch {
	case fs.NArg() == 0:
		return opt, nil, fmt.Errorf("no runs: %w", errArg)
	case opt.smooth < 1:
		return opt, nil, fmt.Errorf("-smooth %d: want 1 or more steps", opt.smooth)
	case opt.table && opt.out == "":
		return opt, nil, errors.New("-table prints the table to stdout, where the SVG goes: give -o FILE for the SVG")
	}
	return opt, fs.Args(), nil
}

// readAll reads the NAME=PATH arguments' runs, in order.
func readAll(args []string) ([]series, error) {
	all := make([]series, 0, len(args))
	for _, a := range args {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("argument %q: %w", a, errArg)
		}
		pts, err := readSteps(path)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", name, err)
		}
		all = append(all, series{name: name, pts: pts})
	}
	return all, nil
}
