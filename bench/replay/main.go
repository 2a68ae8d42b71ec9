// Command replay scores the choice of algorithm, as built (prims' cost
// functions under topo's constants), against runs that
// bench/choice.sh kept (OUT=dir): for each directory, rank count (2, 4,
// 8) and collective that the run measured (all-reduce, broadcast,
// all-gather, reduce-scatter, reduce, all-to-all, gather, scatter) it reads the constants
// the run's gorun --topo printed
// (topo.NP.txt), asks the model for its choice at every measured size, and
// counts the sizes at which that choice's median time is within 15% of the
// fastest algorithm's; a size whose choice the run did not time (an
// algorithm added since) is left out and listed. A change to the cost formulas can so be judged
// against several runs in seconds instead of re-measuring. Given several
// runs it also scores hindsight: each run's fastest algorithms judged by
// the other runs, the most that any choice can expect with the noise
// between runs of one build:
//
//	OUT=/tmp/run1 bench/choice.sh; OUT=/tmp/run2 bench/choice.sh
//	go run ./bench/replay /tmp/run1 /tmp/run2
//
// It also reads the reports of gorun --tune --tune-json (a file, with one
// report or several one after another): there every collective the sweep
// timed, at its sizes, under the model constants the report gives, and
// judged by the sweep's times (and, where the report has a longer run of
// the model's choice against the sweep's pick, by those). So the model
// can be scored against machines measured once, a 16-core node say,
// without running there again:
//
//	gorun --tune -np 8 --tune-json /tmp/np8.json
//	go run ./bench/replay /tmp/np8.json
//
// With -v it also prints, for every size of the choice runs and reports, each
// algorithm's measured and modelled microseconds, marking the model's
// choice (<) and the fastest (*): where a cost formula is off, and by how
// much, rather than only that a choice missed.
//
//	go run ./bench/replay -v /tmp/run1
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/topo"
)

// constants reads the one-host model a gorun --topo report printed.
func constants(path string) (topo.Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return topo.Model{}, err
	}
	return parse(string(b))
}

func parse(s string) (topo.Model, error) {
	f := func(re string) float64 {
		m := regexp.MustCompile(re).FindStringSubmatch(s)
		if m == nil {
			return 0
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	m := topo.DefaultModel()
	m.Local.Alpha = f(`same host\s+alpha ([0-9.]+) us`) * 1e-6
	m.Local.Beta = f(`same host\s+alpha [0-9.]+ us\s+beta ([0-9.]+) ns/B`) * 1e-9
	m.Gamma = f(`gamma ([0-9.]+) ns/B`) * 1e-9
	m.Wake = f(`wake ([0-9.]+) us`) * 1e-6
	m.Round = f(`(?m)^round\s+([0-9.]+) us`) * 1e-6
	m.Cores = int(f(`cores\s+([0-9]+) per host`))
	if u := regexp.MustCompile(`single copy from ([0-9]+) (B|KiB|MiB)`).FindStringSubmatch(s); u != nil {
		v, _ := strconv.ParseFloat(u[1], 64)
		m.Local.Pull = v * map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}[u[2]]
	}
	m.LocalProbed = true
	if !m.Valid() || m.Local.Alpha == 0 || m.Local.Beta == 0 {
		return topo.Model{}, fmt.Errorf("no one-host model in the report")
	}
	return m, nil
}

// medians reads the forced runs a choice run kept (dir/OP.NP.runs) and
// returns each algorithm's median time (the lower middle, as
// bench/choice.sh takes it) by size; nil if there are none.
func medians(dir, op string, np int) map[int]map[string]float64 {
	f, err := os.Open(fmt.Sprintf("%s/%s.%d.runs", dir, op, np))
	if err != nil {
		return nil
	}
	defer f.Close()
	times := map[int]map[string][]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 {
			continue
		}
		b, _ := strconv.Atoi(fs[2])
		t, _ := strconv.ParseFloat(fs[7], 64)
		if times[b] == nil {
			times[b] = map[string][]float64{}
		}
		times[b][fs[6]] = append(times[b][fs[6]], t)
	}
	med := map[int]map[string]float64{}
	for b, byAlgo := range times {
		med[b] = map[string]float64{}
		for a, ts := range byAlgo {
			sort.Float64s(ts)
			med[b][a] = ts[(len(ts)-1)/2]
		}
	}
	return med
}

// tolerance is bench/choice.sh's TOL: a choice is good within 15% of the
// fastest.
const tolerance = 1.15

// fastest returns the algorithm with the lowest time and that time.
func fastest(byAlgo map[string]float64) (string, float64) {
	best, bt := "", 1e300
	for a, t := range byAlgo {
		if t < bt || t == bt && a < best {
			best, bt = a, t
		}
	}
	return best, bt
}

// sizesOf returns the sizes of a run in order.
func sizesOf(run map[int]map[string]float64) []int {
	var sizes []int
	for b := range run {
		sizes = append(sizes, b)
	}
	sort.Ints(sizes)
	return sizes
}

// hindsight scores the choice that knew run a's measurements (its fastest
// algorithm at each size) against run b: how many of the sizes of both
// it got within the tolerance of b's fastest, out of how many. Over runs
// of the same build it measures how far run-to-run noise alone keeps any
// choice from the target.
func hindsight(a, b map[int]map[string]float64) (good, n int) {
	for _, size := range sizesOf(a) {
		if b[size] == nil {
			continue
		}
		pick, _ := fastest(a[size])
		_, best := fastest(b[size])
		n++
		if t, ok := b[size][pick]; ok && t <= tolerance*best {
			good++
		}
	}
	return good, n
}

var (
	ops = []string{"allreduce", "broadcast", "allgather", "reducescatter", "reduce", "alltoall", "gather", "scatter"}
	nps = []int{2, 4, 8}
)

func main() {
	verbose := flag.Bool("v", false, "print every size's measured and modelled time of each algorithm")
	flag.BoolVar(&roundFromSweep, "round-from-sweep", false, "for a report whose model has no message round (gorun before the constant), take it from the sweep's recursive-doubling barrier")
	flag.Parse()
	var dirs []string
	total, n := 0, 0
	for _, arg := range flag.Args() {
		if st, err := os.Stat(arg); err == nil && !st.IsDir() {
			good, judged, err := replayReports(os.Stdout, arg, *verbose)
			if err != nil {
				fmt.Fprintf(os.Stderr, "replay: %v\n", err)
				os.Exit(1)
			}
			total, n = total+good, n+judged
			continue
		}
		dirs = append(dirs, arg)
	}
	for _, dir := range dirs {
		for _, np := range nps {
			path := fmt.Sprintf("%s/topo.%d.txt", dir, np)
			if _, err := os.Stat(path); err != nil {
				continue // the run did not measure np ranks
			}
			m, err := constants(path)
			if err != nil {
				fmt.Fprintf(os.Stderr, "replay: %s np %d: %v\n", dir, np, err)
				continue
			}
			for _, op := range ops {
				coll, _ := topo.ParseCollective(op)
				run := medians(dir, op, np)
				if run == nil {
					continue
				}
				good, judged := 0, 0
				var bad, unjudged []string
				// The ranks of a run shared memory if it measured the
				// algorithm that needs it; runs kept from before it
				// existed did not offer it.
				lay := topo.Uniform(1, np)
				for _, times := range run {
					_, ok := times[string(topo.Shared)]
					lay.Shared = lay.Shared || ok
				}
				for _, b := range sizesOf(run) {
					_, best := fastest(run[b])
					c := prims.Cheapest(m, coll, np, b, lay)
					if *verbose {
						detail(os.Stdout, m, coll, np, b, lay, run[b], c)
					}
					t, ok := run[b][string(c)]
					switch {
					case !ok: // the run did not time it: no judgement
						unjudged = append(unjudged, fmt.Sprintf("%d:%s", b, c))
						continue
					case t <= tolerance*best:
						good++
					default:
						bad = append(bad, fmt.Sprintf("%d:%s", b, c))
					}
					judged++
				}
				line := fmt.Sprintf("%-8s np %d %-10s %2d/%d  %s", dir, np, op, good, judged, strings.Join(bad, " "))
				if len(unjudged) > 0 {
					line += fmt.Sprintf("  (%d not timed by the run: %s)", len(unjudged), strings.Join(unjudged, " "))
				}
				fmt.Println(line)
				total += good
				n += judged
			}
		}
	}
	fmt.Printf("total %d/%d\n", total, n)
	if len(dirs) < 2 {
		return
	}
	// The ceiling that noise sets: each run's fastest, judged by the others.
	total, n = 0, 0
	for _, np := range nps {
		for _, op := range ops {
			good, cnt := 0, 0
			for _, a := range dirs {
				for _, b := range dirs {
					if a == b {
						continue
					}
					g, c := hindsight(medians(a, op, np), medians(b, op, np))
					good, cnt = good+g, cnt+c
				}
			}
			if cnt > 0 {
				fmt.Printf("hindsight np %d %-10s %3d/%d (%.0f%%): one run's fastest, judged by another run\n", np, op, good, cnt, 100*float64(good)/float64(cnt))
			}
			total, n = total+good, n+cnt
		}
	}
	if n > 0 {
		fmt.Printf("hindsight total %d/%d (%.0f%%)\n", total, n, 100*float64(total)/float64(n))
	}
}

// detail prints one size of a choice run: each algorithm the run timed,
// its median microseconds and the model's, the model's choice marked <
// and the fastest *.
func detail(w io.Writer, m topo.Model, coll topo.Collective, np, b int, lay topo.Layout, times map[string]float64, chose topo.Algo) {
	var algos []string
	for a := range times {
		algos = append(algos, a)
	}
	sort.Strings(algos)
	fast, _ := fastest(times)
	fmt.Fprintf(w, "  %-13s np %d %9d", coll, np, b)
	for _, a := range algos {
		mark := " "
		switch {
		case a == string(chose) && a == fast:
			mark = "<*"
		case a == string(chose):
			mark = "<"
		case a == fast:
			mark = "*"
		}
		fmt.Fprintf(w, "  %s %.1f/%.1f%-2s", a, times[a], 1e6*prims.Cost(m, coll, topo.Algo(a), np, b, lay), mark)
	}
	fmt.Fprintln(w)
}

// readReports reads the gorun --tune-json reports in path: one, or several
// one after another (as a script that appends them writes them).
func readReports(path string) ([]prims.TuneReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rs []prims.TuneReport
	dec := json.NewDecoder(f)
	for {
		var r prims.TuneReport
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: report %d: %w", path, len(rs)+1, err)
		}
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("%s: report %d: %w", path, len(rs)+1, err)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no report in it", path)
	}
	return rs, nil
}

// replayReports scores the model as built against the reports in path,
// a line per report and collective, and returns the sizes it judged and
// how many of them the model got within the tolerance of the fastest.
// The judge is the sweep's times, except where the report has a longer
// run of the model's choice against the sweep's pick and the model
// chooses one of the two again: those times are the better measured.
// roundFromSweep is -round-from-sweep.
var roundFromSweep bool

func replayReports(w io.Writer, path string, verbose bool) (total, n int, err error) {
	rs, err := readReports(path)
	if err != nil {
		return 0, 0, err
	}
	for i, r := range rs {
		lay := r.Layout()
		p := lay.Size()
		if roundFromSweep && r.Model.Round == 0 && r.Model.Wake == 0 && len(lay.Hosts) == 1 {
			for _, pt := range r.Points {
				if t, ok := pt.Seconds[string(topo.RecursiveDoubling)]; ok && pt.Collective == "barrier" {
					r.Model.Round = t / float64(bits.Len(uint(p-1)))
				}
			}
		}
		byColl := map[string][]prims.TuneReportPoint{}
		var order []string
		for _, pt := range r.Points {
			if byColl[pt.Collective] == nil {
				order = append(order, pt.Collective)
			}
			byColl[pt.Collective] = append(byColl[pt.Collective], pt)
		}
		for _, name := range order {
			coll, _ := topo.ParseCollective(name)
			good, judged, changed := 0, 0, 0
			var bad, unjudged []string
			for _, pt := range byColl[name] {
				c := string(prims.Cheapest(r.Model, coll, p, pt.Bytes, lay))
				if c != pt.Model {
					changed++
				}
				times := pt.Seconds
				if _, ok := pt.LongerRun[c]; ok {
					times = pt.LongerRun
				}
				if verbose {
					us := map[string]float64{}
					for a, s := range times {
						us[a] = 1e6 * s
					}
					detail(w, r.Model, coll, p, pt.Bytes, lay, us, topo.Algo(c))
				}
				t, ok := times[c]
				if !ok {
					unjudged = append(unjudged, fmt.Sprintf("%d:%s", pt.Bytes, c))
					continue
				}
				if _, best := fastest(times); t <= tolerance*best {
					good++
				} else {
					bad = append(bad, fmt.Sprintf("%d:%s", pt.Bytes, c))
				}
				judged++
			}
			line := fmt.Sprintf("%s#%d np %d %-13s %2d/%d  %s", path, i+1, p, name, good, judged, strings.Join(bad, " "))
			if changed > 0 {
				line += fmt.Sprintf("  (%d choices differ from the report's model)", changed)
			}
			if len(unjudged) > 0 {
				line += fmt.Sprintf("  (%d not timed: %s)", len(unjudged), strings.Join(unjudged, " "))
			}
			fmt.Fprintln(w, line)
			total, n = total+good, n+judged
		}
	}
	return total, n, nil
}
