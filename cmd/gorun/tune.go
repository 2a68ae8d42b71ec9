package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/topo"
)

// tuneProgram turns a --tune invocation into a job, as topoProgram does
// for --topo: N ranks of gorun itself in its hidden tune-rank mode, which
// time the algorithms, and rank 0 writes the decision table. sizes is
// --tune-sizes, checked here so that a mistake is a usage error; jsonPath
// is --tune-json, made absolute and its directory checked, so that a
// mistake is said before the tuning instead of after it.
func tuneProgram(args []string, sizes, jsonPath string) (string, []string, error) {
	if len(args) > 0 {
		return "", nil, usageError{fmt.Errorf("--tune times gorun's own collectives on the ranks and takes no PROGRAM (got %q): use gorun --tune -np N", args[0])}
	}
	if _, err := tuneConfig(sizes); err != nil {
		return "", nil, usageError{err}
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("--tune: cannot find gorun's own executable: %w", err)
	}
	rankArgs := []string{"--" + flagTuneRank}
	if sizes != "" {
		rankArgs = append(rankArgs, "--"+flagTuneSizes, sizes)
	}
	if jsonPath != "" {
		abs, err := filepath.Abs(jsonPath)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(filepath.Dir(abs)); err == nil && !st.IsDir() {
				err = fmt.Errorf("%s is not a directory", filepath.Dir(abs))
			}
		}
		if err != nil {
			return "", nil, usageError{fmt.Errorf("%s %q: %v; give a file in a directory that exists", dashed(flagTuneJSON), jsonPath, err)}
		}
		rankArgs = append(rankArgs, "--"+flagTuneJSON, abs)
	}
	return self, rankArgs, nil
}

// tuneConfig is the default sweep with --tune-sizes MIN-MAX applied.
func tuneConfig(sizes string) (prims.TuneConfig, error) {
	cfg := prims.DefaultTuneConfig()
	if sizes == "" {
		return cfg, nil
	}
	lo, hi, ok := strings.Cut(sizes, "-")
	if !ok {
		hi = lo
	}
	var err error
	if cfg.MinBytes, err = spmd.ParseSize(lo); err == nil {
		cfg.MaxBytes, err = spmd.ParseSize(hi)
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return cfg, fmt.Errorf("%s %q: %v; want MIN-MAX, as in 8-16M", dashed(flagTuneSizes), sizes, err)
	}
	return cfg, nil
}

// runTuneRank is one rank of gorun --tune: join the job, time the
// algorithms collectively, and let rank 0 write the table, say what it
// measured and, with --tune-json, write all of it to jsonPath.
func runTuneRank(ctx context.Context, sizes, jsonPath string) error {
	cfg, err := tuneConfig(sizes)
	if err != nil {
		return err
	}
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	start := time.Now()
	busy0, total0, known0 := hostCPU()
	own0 := ownCPU()
	tn, err := prims.Tune(ctx, w.Comm, cfg)
	if err != nil {
		return fmt.Errorf("rank %d: %w", w.Rank(), err)
	}
	// How much of each host the rest of it took while the ranks tuned.
	busy1, total1, known1 := hostCPU()
	mine := loadSample{busy1 - busy0, total1 - total0, ownCPU() - own0, 0}
	if known0 && known1 {
		mine.known = 1
	}
	all := make([]float64, 4*w.Size())
	// Linear, forced: a choice would look for the table, which rank 0 writes only next.
	if err := prims.Gather(ctx, w.Comm, []float64{mine.busy, mine.total, mine.own, mine.known}, all, 0, prims.WithAlgo(topo.Linear)); err != nil {
		return fmt.Errorf("rank %d: gathering the hosts' load: %w", w.Rank(), err)
	}
	if w.Rank() == 0 {
		samples := make([]loadSample, w.Size())
		for r := range samples {
			samples[r] = loadSample{all[4*r], all[4*r+1], all[4*r+2], all[4*r+3]}
		}
		others, host := othersShare(samples, tn.Layout)
		hostName := ""
		if host >= 0 && host < len(tn.Table.Hosts) {
			hostName = tn.Table.Hosts[host]
		}
		path := prims.TuneFilePath()
		if path == "" {
			return fmt.Errorf("no place for the decision tables: set %s to a file (not none), or HOME or XDG_CACHE_HOME", contract.EnvTuneFile)
		}
		if err := prims.SaveTuneTable(path, tn.Table); err != nil {
			return err
		}
		if err := summary(os.Stdout, tn, path, time.Since(start), others, hostName); err != nil {
			return err
		}
		if jsonPath != "" {
			rep := tn.Report()
			rep.OthersCPUShare = others
			if err := prims.SaveTuneReport(jsonPath, rep); err != nil {
				return fmt.Errorf("%s: %w", dashed(flagTuneJSON), err)
			}
			fmt.Printf("measurements written to %s\n", jsonPath)
		}
	}
	return w.Barrier(ctx)
}

// summary writes what --tune measured: per collective and size the
// fastest algorithm, its time, the one the table keeps (the model's
// where it was within 5%, in the sweep or in a longer run of the two),
// the model's choice and how much slower that measured, and the longer
// run's ratio where there was one; then how often the model was right
// (within prims.Agreement of the fastest) and how often a longer run
// kept it. others is the largest share of a host's CPU time that was not
// the ranks' while they tuned (host), -1 if unknown: past quietShare the
// summary says the table is suspect, first and last.
func summary(out io.Writer, tn prims.Tuning, path string, took time.Duration, others float64, host string) error {
	var b strings.Builder
	k := tn.Table.TuneKey
	where := "the host"
	if host != "" && len(k.Hosts) > 1 {
		where = "host " + host
	}
	load, warning := "", ""
	if others >= 0 {
		load = fmt.Sprintf("; the rest of %s took %.0f%% of its CPU time", where, 100*others)
	}
	if others > quietShare {
		warning = fmt.Sprintf("warning: other work took %.0f%% of the CPU time of %s while gorun tuned: these times, and the table, may be its as much as gorun's; run gorun --tune again when the host is quiet (or set %s=none to follow the model)\n",
			100*others, where, contract.EnvTuneFile)
	}
	b.WriteString(warning)
	fmt.Fprintf(&b, "# gorun --tune: %d ranks (%s), %d points in %.1f s%s\n", k.Ranks(), k, len(tn.Points), took.Seconds(), load)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "collective\tbytes\tfastest\ttime_us\tkept\tmodel\tmodel/fastest\tlonger run\t")
	agree, agreeLong, confirmed, reverted := 0, 0, 0, 0
	last := topo.Collective(-1)
	for _, pt := range tn.Points {
		best, secs := pt.Best()
		name := pt.Coll.String()
		if pt.Coll == last {
			name = ""
		}
		last = pt.Coll
		mark := ""
		if pt.ModelAgrees() {
			agree++
		} else {
			mark = " *"
		}
		long := ""
		switch {
		case len(pt.Confirm) == 2 && pt.Confirm[0] <= pt.Confirm[1]*prims.Agreement:
			agreeLong++
		case len(pt.Confirm) != 2 && pt.ModelAgrees():
			agreeLong++
		}
		if len(pt.Confirm) == 2 {
			confirmed++
			long = fmt.Sprintf("model/%s %.2f", pt.Pick(), pt.Confirm[0]/pt.Confirm[1])
			if pt.Kept == pt.Model {
				reverted++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%.2f%s\t%s\t\n", name, topo.Size(pt.Bytes), best, secs*1e6, pt.Kept, pt.Model, pt.ModelSeconds()/secs, mark, long)
	}
	tw.Flush()
	if n := len(tn.Points); n > 0 {
		fmt.Fprintf(&b, "model agreement: %d of %d sizes (%.0f%%) within %.0f%% of the fastest (* where not)\n",
			agree, n, 100*float64(agree)/float64(n), 100*(prims.Agreement-1))
	}
	if confirmed > 0 {
		n := len(tn.Points)
		fmt.Fprintf(&b, "longer runs: %d of %d picks that beat the model by more than %.0f%% kept the model after all (it measured within that); with their times, model agreement %d of %d (%.0f%%)\n",
			reverted, confirmed, 100*(prims.TuneTie-1), agreeLong, n, 100*float64(agreeLong)/float64(n))
	}
	fmt.Fprintf(&b, "decision table written to %s\n", path)
	b.WriteString(warning)
	_, err := io.WriteString(out, b.String())
	return err
}
