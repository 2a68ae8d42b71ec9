package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
)

func pprofCommand() *cli.Command {
	return &cli.Command{
		Name:      "pprof",
		Usage:     "write a pprof profile of communication time by rank, operation and call site (go tool pprof reads it)",
		ArgsUsage: "DIR",
		Flags:     append(narrowFlags(), outputFlag("comm.pb.gz")),
		Action: func(cliCtx *cli.Context) error {
			j, err := loadJob(cliCtx, cliCtx.App.ErrWriter)
			if err != nil {
				return err
			}
			p := commProfile(j)
			return output(cliCtx, p.Write)
		},
	}
}

// commProfile is a profile whose samples are the communication calls:
// each call's stack is its operation (the leaf), its call site, and its
// rank (the root), so that pprof's views group by any of them; every
// sample carries the calls, their time and their bytes, and a rank label.
func commProfile(j *job.Job) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "calls", Unit: "count"},
			{Type: "time", Unit: "nanoseconds"},
			{Type: "bytes", Unit: "bytes"},
		},
		DefaultSampleType: "time",
		PeriodType:        &profile.ValueType{Type: "time", Unit: "nanoseconds"},
		Period:            1,
		DurationNanos:     j.Duration,
		Comments:          []string{"goprof pprof " + j.Dir, fmt.Sprintf("%d ranks", j.Size)},
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	loc := func(name, file string, line int64) *profile.Location {
		key := name + "\x00" + file + "\x00" + strconv.FormatInt(line, 10)
		if l := locs[key]; l != nil {
			return l
		}
		fkey := name + "\x00" + file
		f := funcs[fkey]
		if f == nil {
			f = &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: file}
			funcs[fkey] = f
			p.Function = append(p.Function, f)
		}
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f, Line: line}}}
		locs[key] = l
		p.Location = append(p.Location, l)
		return l
	}
	type key struct {
		rank     int
		op, site string
	}
	type acc struct{ calls, ns, bytes int64 }
	by := map[key]*acc{}
	var keys []key
	for _, r := range j.Present() {
		for i := range r.Events {
			e := &r.Events[i]
			if !report.IsComm(e) {
				continue
			}
			k := key{r.Rank, report.OpName(j, e), j.Str(e.Site)}
			a := by[k]
			if a == nil {
				a = &acc{}
				by[k] = a
				keys = append(keys, k)
			}
			a.calls++
			a.ns += e.Dur()
			a.bytes += e.Bytes
		}
	}
	for _, k := range keys {
		a := by[k]
		fn, file, line := splitSite(k.site)
		stack := []*profile.Location{
			loc(k.op, "", 0),
			loc(fn, file, line),
			loc(fmt.Sprintf("rank %d", k.rank), "", 0),
		}
		p.Sample = append(p.Sample, &profile.Sample{
			Location: stack,
			Value:    []int64{a.calls, a.ns, a.bytes},
			Label:    map[string][]string{"rank": {strconv.Itoa(k.rank)}, "op": {k.op}},
		})
	}
	return p
}

// splitSite splits "pkg.Func dir/file.go:12" into its parts.
func splitSite(s string) (fn, file string, line int64) {
	if s == "" {
		return "(unknown site)", "", 0
	}
	fn, loc, ok := strings.Cut(s, " ")
	if !ok {
		return s, "", 0
	}
	if i := strings.LastIndexByte(loc, ':'); i > 0 {
		if n, err := strconv.ParseInt(loc[i+1:], 10, 64); err == nil {
			return fn, loc[:i], n
		}
	}
	return fn, loc, 0
}
