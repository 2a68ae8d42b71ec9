package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
)

const (
	flagRank   = "rank"
	flagFrom   = "from"
	flagTo     = "to"
	flagOutput = "output"
	flagJSON   = "json"
	flagWidth  = "width"
)

// narrowFlags are the flags of every command that reads a job.
func narrowFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagRank, Usage: "only the ranks in `LIST`, such as 0,2-5"},
		// Strings, not cli.DurationFlag: its error for "1.5" says only
		// "parse error", and its help "(default: 0s)" for the end.
		&cli.StringFlag{Name: flagFrom, Usage: "only the events that start `AT` or after, counted from the job's first event, a duration with a unit (1.5s, 200ms) (default: its first event)"},
		&cli.StringFlag{Name: flagTo, Usage: "only the events that start before `AT`, counted from the job's first event (default: its end)"},
	}
}

func outputFlag(def string) cli.Flag {
	return &cli.StringFlag{Name: flagOutput, Aliases: []string{"o"}, Value: def, Usage: "write to `FILE` (- for standard output)"}
}

// loadJob reads the job whose directory is the command's one argument,
// narrowed by --rank, --from and --to. What is wrong with the directory's
// files goes to warn (nil: kept in the job for the report to show).
func loadJob(cliCtx *cli.Context, warn io.Writer) (*job.Job, error) {
	if cliCtx.Args().Len() != 1 {
		return nil, usageError{fmt.Errorf("goprof %s needs one directory, the one given to gorun --profile (got %d arguments)", cliCtx.Command.Name, cliCtx.Args().Len())}
	}
	return loadDir(cliCtx, cliCtx.Args().First(), warn)
}

func loadDir(cliCtx *cli.Context, dir string, warn io.Writer) (*job.Job, error) {
	if fi, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such directory: give the directory of gorun --profile DIR", dir)
	} else if err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: give the directory gorun --profile wrote", dir)
	}
	j, err := job.Load(dir)
	if err != nil {
		return nil, err
	}
	var keep []int
	if s := cliCtx.String(flagRank); s != "" {
		if keep, err = job.ParseRanks(s); err != nil {
			return nil, usageError{fmt.Errorf("--rank %w", err)}
		}
	}
	from, err := durationFlag(cliCtx, flagFrom)
	if err != nil {
		return nil, err
	}
	to, err := durationFlag(cliCtx, flagTo)
	if err != nil {
		return nil, err
	}
	if from < 0 || to < 0 {
		return nil, usageError{errors.New("--from and --to count from the job's first event: give 0 or more")}
	}
	end := time.Duration(j.Duration)
	if err := j.Narrow(keep, int64(from), int64(to)); err != nil {
		return nil, usageError{err}
	}
	if from > end {
		return nil, usageError{fmt.Errorf("--from %s is past the trace's end at %v (%s)", cliCtx.String(flagFrom), end.Round(time.Microsecond), dir)}
	}
	if warn != nil {
		for _, p := range j.Problems {
			fmt.Fprintf(warn, "goprof: warning: %s\n", p)
		}
		if n := j.EarlierNote(); n != "" {
			fmt.Fprintf(warn, "goprof: note: %s\n", n)
		}
	}
	return j, nil
}

// durationFlag reads flag name, a duration with a unit; "" is 0.
func durationFlag(cliCtx *cli.Context, name string) (time.Duration, error) {
	s := cliCtx.String(name)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, usageError{fmt.Errorf("--%s %s: want a duration with a unit, e.g. 1.5s or 200ms", name, s)}
	}
	return d, nil
}

// output runs write on the output the command was told to make: "-" is
// standard output; a file appears whole, written under a temporary name
// and renamed, and not at all when write fails.
func output(cliCtx *cli.Context, write func(io.Writer) error) error {
	name := cliCtx.String(flagOutput)
	if name == "-" || name == "" {
		w := bufio.NewWriter(cliCtx.App.Writer)
		if err := write(w); err != nil {
			w.Flush()
			return err
		}
		return w.Flush()
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return fmt.Errorf("--output %s: %w", name, err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}
