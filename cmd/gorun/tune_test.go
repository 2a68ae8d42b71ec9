package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/topo"
)

// gorun --tune writes a decision table that parses, and gorun --topo then
// shows the choices that come from it; --tune-json writes every time it
// measured, relative to the directory gorun ran in.
func TestTune(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tune.toml")
	env := contract.EnvTuneFile + "=" + path
	cmd := gorunCmd(t, "--tune", "-np", "2", "--tune-sizes", "8-1K", "--tune-json", "tune.json")
	cmd.Env = append(cmd.Env, env)
	cmd.Dir = dir
	r := runGorun(t, cmd)
	if r.code != 0 || !strings.Contains(r.stdout, "model agreement:") || !strings.Contains(r.stdout, "written to "+path) {
		t.Fatalf("gorun --tune:\n%s", r)
	}
	if strings.Contains(r.stderr, "not using the decision tables") {
		t.Errorf("gorun --tune looked for the table it was about to write:\n%s", r.stderr)
	}
	rep := readTuneReport(t, filepath.Join(dir, "tune.json"))
	if len(rep.RankHosts) != 2 || rep.RankHosts[0] != rep.RankHosts[1] || !rep.SharedMemory || rep.Key.Transport != "shm" || !rep.Model.LocalProbed || rep.OthersCPUShare < 0 {
		t.Errorf("report of 2 ranks on this host: %+v", rep)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("%d points", len(rep.Points))) {
		t.Errorf("the report holds %d points; gorun said:\n%s", len(rep.Points), r.stdout)
	}
	f, err := prims.ReadTuneFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tables) != 1 || f.Tables[0].Ranks() != 2 || len(f.Tables[0].Rules) == 0 {
		t.Fatalf("%s holds %+v", path, f.Tables)
	}
	cmd = gorunCmd(t, "--topo", "-np", "2")
	cmd.Env = append(cmd.Env, env)
	r = runGorun(t, cmd)
	if r.code != 0 || !strings.Contains(r.stdout, "(table)") || !strings.Contains(r.stdout, "decision table: "+path) {
		t.Fatalf("gorun --topo after --tune shows no choice from the table:\n%s", r)
	}
	// Another rank count is another key: the model decides.
	cmd = gorunCmd(t, "--topo", "-np", "3")
	cmd.Env = append(cmd.Env, env)
	if r = runGorun(t, cmd); r.code != 0 || strings.Contains(r.stdout, "(table)") {
		t.Fatalf("gorun --topo -np 3 with a table for 2 ranks:\n%s", r)
	}
}

// readTuneReport reads and checks a --tune-json report: every point's
// model choice and kept algorithm among those it timed.
func readTuneReport(t *testing.T, path string) prims.TuneReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep prims.TuneReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := rep.Check(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, pt := range rep.Points {
		if _, ok := pt.Seconds[pt.Kept]; !ok {
			t.Errorf("%s at %d bytes keeps %s, not among %v", pt.Collective, pt.Bytes, pt.Kept, pt.Seconds)
		}
	}
	return rep
}

func TestTuneUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--tune-json", "x.json", "-np", "2", "hostname"},
		{"--tune", "-np", "2", "--tune-json", "/no/such/dir/x.json"},
		{"--tune", "-np", "2", "--tune-json", ""},
		{"--tune", "-np", "2", "hostname"},
		{"--tune", "-np", "1"},
		{"--tune", "--topo", "-np", "2"},
		{"--tune", "-np", "2", "--tune-sizes", "1K-8"},
		{"--tune", "-np", "2", "--tune-sizes", "big"},
		{"--tune-sizes", "8-1K", "-np", "2", "hostname"},
	} {
		if r := gorun(t, "", args...); r.code != 2 {
			t.Errorf("gorun %s: want a usage error:\n%s", strings.Join(args, " "), r)
		}
	}
}

// TestTuneSummary: the report shows what the table keeps, the longer
// run's ratio where there was one, and the agreement both ways.
func TestTuneSummary(t *testing.T) {
	us := 1e-6
	points := []prims.TunePoint{
		// The model measured fastest: nothing more to time.
		{Coll: topo.AllReduce, Bytes: 8, Algos: []topo.Algo{topo.Shared, topo.Ring}, Seconds: []float64{1 * us, 2 * us}, Model: topo.Shared, Kept: topo.Shared},
		// The sweep's ring beat the model by 2x; the longer run found them even.
		{Coll: topo.AllReduce, Bytes: 1 << 20, Algos: []topo.Algo{topo.Shared, topo.Ring}, Seconds: []float64{200 * us, 100 * us}, Model: topo.Shared, Kept: topo.Shared, Confirm: []float64{101 * us, 100 * us}},
		// The sweep's linear beat the model, and did again.
		{Coll: topo.Gather, Bytes: 1 << 20, Algos: []topo.Algo{topo.Tree, topo.Linear}, Seconds: []float64{300 * us, 100 * us}, Model: topo.Tree, Kept: topo.Linear, Confirm: []float64{290 * us, 100 * us}},
	}
	var b strings.Builder
	if err := summary(&b, prims.Tuning{Points: points}, "t.toml", time.Second, 0.03, ""); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "warning") {
		t.Errorf("a warning for a quiet host:\n%s", out)
	}
	for _, want := range []string{
		"the rest of the host took 3% of its CPU time",
		"model agreement: 1 of 3 sizes (33%)",
		"longer runs: 1 of 2 picks that beat the model by more than 5% kept the model after all (it measured within that); with their times, model agreement 2 of 3 (67%)",
		"model/ring 1.01",
		"model/linear 2.90",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if row := strings.Join(strings.Fields(strings.Split(out, "\n")[3]), " "); !strings.HasPrefix(row, "1 MiB ring 100.00 shared shared") {
		t.Errorf("the 1 MiB all-reduce row %q does not keep the model:\n%s", row, out)
	}
	// A busy host: the warning comes first and last, naming the host.
	b.Reset()
	key := prims.TuneKey{Hosts: []string{"n1", "n2"}, PerHost: []int{1, 1}, Transport: "tcp"}
	if err := summary(&b, prims.Tuning{Table: prims.TuneTable{TuneKey: key}, Points: points}, "t.toml", time.Second, 0.47, "n2"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := "warning: other work took 47% of the CPU time of host n2 while gorun tuned"
	if !strings.HasPrefix(lines[0], want) || !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Errorf("want %q first and last:\n%s", want, b.String())
	}
}

// TestOthersShare: the rest of the busiest host, the ranks' own CPU time
// taken from its busy time; hosts that could not say are left out.
func TestOthersShare(t *testing.T) {
	lay := topo.FromHostIDs([]string{"a", "a", "b", "b", "c"})
	samples := []loadSample{
		{busy: 2.0, total: 4, own: 0.9, known: 1}, // host a: 2.0 busy, 1.8 the ranks'
		{busy: 2.0, total: 4, own: 0.9, known: 1},
		{busy: 3.0, total: 4, own: 0.5, known: 1}, // host b: 3.0 busy, 1.0 the ranks': 50%
		{busy: 3.0, total: 4, own: 0.5, known: 1},
		{known: 0}, // host c: no /proc/stat
	}
	if share, host := othersShare(samples, lay); host != 1 || share < 0.499 || share > 0.501 {
		t.Errorf("others' share %.3f on host %d, want 0.5 on host 1", share, host)
	}
	if share, host := othersShare(samples[4:], topo.FromHostIDs([]string{"c"})); share != -1 || host != -1 {
		t.Errorf("no host could say: got %.2f on host %d", share, host)
	}
	if busy, total, ok := hostCPU(); ok && (busy <= 0 || total < busy) {
		t.Errorf("this host: %.1f s busy of %.1f", busy, total)
	}
}
