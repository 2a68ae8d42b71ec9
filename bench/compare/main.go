// Command compare puts gorun's collbench results beside Open MPI's
// (bench/mpi/coll.c prints the same columns): one row per size with both
// times, both bus bandwidths and their ratios, and optionally an SVG chart
// of bus bandwidth against size.
//
//	compare -svg chart.svg "allreduce np 2" gorun.txt ompi.txt "allreduce np 4" gorun4.txt ompi4.txt
//
// Each series is a label and two files: gorun's result, then Open MPI's.
// A file may hold several runs (bench/mpi.sh appends REPS of them); each
// size then counts with its median time, and the busbw of that run.
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// row is one size of one result file.
type row struct {
	bytes  int
	algo   string
	timeUS float64
	busbw  float64
}

// series is one label's pair of results.
type series struct {
	label       string
	gorun, ompi []row
}

func main() {
	svg := flag.String("svg", "", "also write a chart of bus bandwidth against size to `FILE`")
	title := flag.String("title", "gorun against Open MPI", "the chart's `TITLE`")
	flag.Parse()
	if err := run(flag.Args(), *svg, *title, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(args []string, svg, title string, out io.Writer) error {
	if len(args) == 0 || len(args)%3 != 0 {
		return fmt.Errorf("want triples LABEL GORUN_FILE OMPI_FILE, got %d arguments", len(args))
	}
	var all []series
	for i := 0; i < len(args); i += 3 {
		g, err := readRows(args[i+1])
		if err != nil {
			return err
		}
		o, err := readRows(args[i+2])
		if err != nil {
			return err
		}
		all = append(all, series{label: args[i], gorun: g, ompi: o})
	}
	table(out, all)
	if svg == "" {
		return nil
	}
	f, err := os.Create(svg)
	if err != nil {
		return err
	}
	chart(f, title, all)
	return f.Close()
}

// readRows parses collbench's columns: op np bytes count type redop algo
// time_us algbw_GBps busbw_GBps wrong; '#' lines are comments.
func readRows(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		if len(fs) < 11 {
			return nil, fmt.Errorf("%s:%d: %d columns, want 11 (collbench's)", path, line, len(fs))
		}
		b, e1 := strconv.Atoi(fs[2])
		t, e2 := strconv.ParseFloat(fs[7], 64)
		bw, e3 := strconv.ParseFloat(fs[9], 64)
		if e1 != nil || e2 != nil || e3 != nil {
			return nil, fmt.Errorf("%s:%d: bytes, time_us or busbw_GBps is not a number", path, line)
		}
		rows = append(rows, row{bytes: b, algo: fs[6], timeUS: t, busbw: bw})
	}
	return medians(rows), sc.Err()
}

// medians keeps one row per size, the one with the median time (the lower
// middle one of an even count), in the order the sizes first appear.
func medians(rows []row) []row {
	by := map[int][]row{}
	var order []int
	for _, r := range rows {
		if by[r.bytes] == nil {
			order = append(order, r.bytes)
		}
		by[r.bytes] = append(by[r.bytes], r)
	}
	out := make([]row, 0, len(order))
	for _, b := range order {
		rs := by[b]
		slices.SortFunc(rs, func(x, y row) int { return cmp.Compare(x.timeUS, y.timeUS) })
		out = append(out, rs[(len(rs)-1)/2])
	}
	return out
}

// table prints, per series, the sizes both files have.
func table(w io.Writer, all []series) {
	fmt.Fprintf(w, "%-22s %10s %13s %11s %11s %7s %11s %11s %7s\n",
		"# series", "bytes", "gorun_algo", "gorun_us", "ompi_us", "time_x", "gorun_GBps", "ompi_GBps", "busbw_x")
	for _, s := range all {
		ompi := map[int]row{}
		for _, r := range s.ompi {
			ompi[r.bytes] = r
		}
		for _, g := range s.gorun {
			o, ok := ompi[g.bytes]
			if !ok {
				continue
			}
			fmt.Fprintf(w, "%-22s %10d %13s %11.2f %11.2f %7.2f %11.3f %11.3f %7.2f\n",
				s.label, g.bytes, g.algo, g.timeUS, o.timeUS, g.timeUS/o.timeUS, g.busbw, o.busbw, ratio(g.busbw, o.busbw))
		}
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
