// Command replay scores topo's model, as built, against runs that
// bench/choice.sh kept (OUT=dir): for each directory, rank count (4, 8)
// and collective it reads the constants the run's gorun --topo printed
// (topo.NP.txt), asks the model for its choice at every measured size, and
// counts the sizes at which that choice's median time is within 15% of the
// fastest algorithm's. A change to the cost formulas can so be judged
// against several runs in seconds instead of re-measuring:
//
//	OUT=/tmp/run1 bench/choice.sh; OUT=/tmp/run2 bench/choice.sh
//	go run ./bench/replay /tmp/run1 /tmp/run2
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

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

func main() {
	total, n := 0, 0
	for _, dir := range os.Args[1:] {
		for _, np := range []int{4, 8} {
			m, err := constants(fmt.Sprintf("%s/topo.%d.txt", dir, np))
			if err != nil {
				fmt.Fprintf(os.Stderr, "replay: %s np %d: %v\n", dir, np, err)
				continue
			}
			for _, op := range []string{"allreduce", "broadcast", "allgather"} {
				coll, _ := topo.ParseCollective(op)
				f, err := os.Open(fmt.Sprintf("%s/%s.%d.runs", dir, op, np))
				if err != nil {
					continue
				}
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
				f.Close()
				var sizes []int
				for b := range times {
					sizes = append(sizes, b)
				}
				sort.Ints(sizes)
				good := 0
				var bad []string
				for _, b := range sizes {
					best := 1e18
					med := map[string]float64{}
					for a, ts := range times[b] {
						sort.Float64s(ts)
						med[a] = ts[(len(ts)-1)/2]
						best = min(best, med[a])
					}
					c := m.Choose(coll, np, b, topo.Uniform(1, np))
					if med[string(c)] <= 1.15*best {
						good++
					} else {
						bad = append(bad, fmt.Sprintf("%d:%s", b, c))
					}
				}
				fmt.Printf("%-8s np %d %-10s %2d/%d  %s\n", dir, np, op, good, len(sizes), strings.Join(bad, " "))
				total += good
				n += len(sizes)
			}
		}
	}
	fmt.Printf("total %d/%d\n", total, n)
}
