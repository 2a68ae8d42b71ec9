package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/topo"
)

func TestParse(t *testing.T) {
	report := `# 4 ranks on 1 host
host 0  vm (vm:d1cb44c1)  4 ranks:  0 1 2 3

# model
same host   alpha 1.48 us                  beta 0.4455 ns/B (2.24 GB/s)  measured
other host  alpha 50.00 us                 beta 0.9091 ns/B (1.10 GB/s)  assumed
reduction   gamma 0.2911 ns/B (3.44 GB/s)
cores       2 per host                     wake 4.09 us per rank beyond them
round       0.32 us                        a collective's message round, every rank busy
`
	m, err := parse(report)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return a > b*0.999 && a < b*1.001 }
	if !near(m.Local.Alpha, 1.48e-6) || !near(m.Local.Beta, 0.4455e-9) || !near(m.Gamma, 0.2911e-9) || !near(m.Wake, 4.09e-6) || !near(m.Round, 0.32e-6) || m.Cores != 2 {
		t.Errorf("parsed %+v", m)
	}
	if _, err := parse("gorun: no such flag"); err == nil {
		t.Error("a report without a model parsed")
	}
}

func TestHindsight(t *testing.T) {
	a := map[int]map[string]float64{
		8:  {"ring": 10, "tree": 20},   // b finds tree faster by more than 15%
		16: {"ring": 10, "tree": 11},   // b finds tree faster, ring within 15%
		32: {"ring": 5, "linear": 9},   // b did not measure this size
		64: {"ring": 30, "linear": 10}, // b did not run linear
	}
	b := map[int]map[string]float64{
		8:  {"ring": 30, "tree": 20},
		16: {"ring": 10.5, "tree": 10},
		64: {"ring": 30},
	}
	if good, n := hindsight(a, b); good != 1 || n != 3 {
		t.Errorf("hindsight: %d of %d, want 1 of 3", good, n)
	}
	if good, n := hindsight(a, a); good != 4 || n != 4 {
		t.Errorf("a run judged by itself: %d of %d, want 4 of 4", good, n)
	}
}

// TestReplayReports: a --tune-json report is judged by its sweep's times,
// or by its longer run where the model chooses one of its two; the
// choices are the model's as built, under the report's constants.
func TestReplayReports(t *testing.T) {
	m := topo.DefaultModel()
	m.Cores = 4
	ids := []string{"a", "a", "a", "a"}
	lay := topo.FromHostIDs(ids)
	lay.Shared = true
	coll := topo.AllReduce
	choice := func(b int) string { return string(prims.Cheapest(m, coll, 4, b, lay)) }
	other := func(b int) string {
		for _, a := range prims.Algos(coll) {
			if string(a) != choice(b) && a != topo.Hierarchical {
				return string(a)
			}
		}
		t.Fatal("one all-reduce algorithm")
		return ""
	}
	pt := func(b int, chosen, another float64, longer map[string]float64) prims.TuneReportPoint {
		return prims.TuneReportPoint{Collective: coll.String(), Bytes: b, Model: choice(b), Kept: choice(b),
			Seconds: map[string]float64{choice(b): chosen, other(b): another}, LongerRun: longer}
	}
	rep := prims.TuneReport{RankHosts: ids, SharedMemory: true, Model: m, Points: []prims.TuneReportPoint{
		pt(8, 1, 2, nil),       // the fastest
		pt(1<<10, 1.1, 1, nil), // within 15%
		pt(1<<16, 2, 1, nil),   // not
		pt(1<<20, 2, 1, map[string]float64{choice(1 << 20): 1, other(1 << 20): 1.05}), // the longer run says it is
	}}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(path, append(append(b, '\n'), b...), 0o644); err != nil { // two reports
		t.Fatal(err)
	}
	var out strings.Builder
	good, n, err := replayReports(&out, path, false)
	if err != nil {
		t.Fatal(err)
	}
	if good != 6 || n != 8 || !strings.Contains(out.String(), "np 4 allreduce      3/4  65536:"+choice(1<<16)) {
		t.Errorf("%d of %d good, want 6 of 8:\n%s", good, n, out.String())
	}
	for _, bad := range []string{"", "{", `{"rank_hosts": ["a", "a"], "model": {"cores": 0}}`,
		`{"rank_hosts": ["a", "a"], "model": {"cores": 2}, "points": [{"collective": "allsum", "seconds": {"ring": 1}}]}`} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := replayReports(&out, path, false); err == nil {
			t.Errorf("report %q: no error", bad)
		}
	}
}
