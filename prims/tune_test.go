package prims

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

const goodTuneFile = `version = 1

[[table]]
hosts = ["a", "b"]
ranks_per_host = [2, 2]
transport = "shm+tcp"
measured_on = "a"
measured_at = 2026-01-02T03:04:05Z

[[table.rule]]
collective = "allreduce"
steps = [{from = 8, algo = "linear"}, {from = 4096, algo = "recdbl"}, {from = 1048576, algo = "ring"}]

[[table.rule]]
collective = "barrier"
steps = [{from = 0, algo = "tree"}]
`

func TestParseTuneFile(t *testing.T) {
	good := goodTuneFile
	tests := []struct {
		name, data, err string
	}{
		{"good", good, ""},
		{"version", strings.Replace(good, "version = 1", "version = 2", 1), "version 2, this gorun reads version 1"},
		{"unknown algorithm", strings.Replace(good, `"recdbl"`, `"fastest"`, 1), `table 1 (hosts a,b, ranks per host [2 2], transport shm+tcp): allreduce from 4096: unknown algorithm "fastest"`},
		{"not applicable", strings.Replace(good, `algo = "tree"`, `algo = "ring"`, 1), "barrier from 0: ring does not implement barrier"},
		{"unsorted", strings.Replace(good, "from = 4096", "from = 2000000", 1), "allreduce: sizes [8 2000000 1048576] are not increasing"},
		{"unknown collective", strings.Replace(good, `"barrier"`, `"barier"`, 1), `unknown collective "barier"`},
		{"hosts and counts", strings.Replace(good, "[2, 2]", "[4]", 1), "2 hosts and 1 ranks_per_host"},
		{"unknown key", strings.Replace(good, "transport =", "transprt =", 1), "tune.toml:6:1: unknown key table.transprt"},
		{"not toml", "version = [", "tune.toml:1:"},
		{"two rules", good + strings.Repeat("\n[[table.rule]]\ncollective = \"barrier\"\nsteps = [{from = 0, algo = \"tree\"}]\n", 1), "two rules for barrier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseTuneFile("tune.toml", []byte(tt.data))
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Tables) != 1 || len(f.Tables[0].Rules) != 2 {
					t.Fatalf("parsed %+v", f)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "tune.toml") || !errors.Is(err, ErrTuneFile) {
				t.Fatalf("error %v, want ErrTuneFile naming tune.toml and %q", err, tt.err)
			}
		})
	}
}

func TestTunedLookup(t *testing.T) {
	f, err := ParseTuneFile("tune.toml", []byte(goodTuneFile))
	if err != nil {
		t.Fatal(err)
	}
	key := TuneKey{Hosts: []string{"a", "b"}, PerHost: []int{2, 2}, Transport: "shm+tcp"}
	tab := tunedFrom(f.Lookup(key), "test")
	tests := []struct {
		coll  topo.Collective
		bytes int
		want  topo.Algo
	}{
		{topo.AllReduce, 0, topo.Linear}, // below the first step: the first's
		{topo.AllReduce, 8, topo.Linear},
		{topo.AllReduce, 4095, topo.Linear}, // between steps: the one below
		{topo.AllReduce, 4096, topo.RecursiveDoubling},
		{topo.AllReduce, 1<<20 - 1, topo.RecursiveDoubling},
		{topo.AllReduce, 1 << 20, topo.Ring},
		{topo.AllReduce, 1 << 30, topo.Ring}, // beyond the last: the last's
		{topo.Barrier, 0, topo.Tree},
		{topo.Broadcast, 8, ""}, // no rule: the model's
	}
	for _, tt := range tests {
		got, ok := tab.lookup(tt.coll, tt.bytes)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("lookup(%s, %d) = %q, %v, want %q", tt.coll, tt.bytes, got, ok, tt.want)
		}
	}
	for _, other := range []TuneKey{
		{Hosts: []string{"a", "b"}, PerHost: []int{2, 2}, Transport: "tcp"},
		{Hosts: []string{"b", "a"}, PerHost: []int{2, 2}, Transport: "shm+tcp"},
		{Hosts: []string{"a", "b"}, PerHost: []int{1, 3}, Transport: "shm+tcp"},
	} {
		if f.Lookup(other) != nil {
			t.Errorf("Lookup(%s) found the table of %s", other, key)
		}
	}
	var none *tuned
	if _, ok := none.lookup(topo.AllReduce, 8); ok {
		t.Error("a nil table decides")
	}
	got, err := decodeTuned(encodeTuned(tab))
	if err != nil || fmt.Sprint(got.steps) != fmt.Sprint(tab.steps) {
		t.Errorf("decode(encode(table)) = %v, %v, want %v", got, err, tab.steps)
	}
	if got, err := decodeTuned(encodeTuned(nil)); got != nil || err != nil {
		t.Errorf("decode(encode(nil)) = %v, %v", got, err)
	}
	if _, err := decodeTuned([]byte{1, 2, 1, 0}); err == nil {
		t.Error("a truncated message decoded")
	}
}

// SaveTuneTable keeps the tables of other keys, replaces its own, and
// leaves no temporary file; it refuses to overwrite a file it cannot read.
func TestSaveTuneTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "tune.toml")
	a := TuneTable{TuneKey: TuneKey{Hosts: []string{"a"}, PerHost: []int{2}, Transport: "shm"},
		Rules: []TuneRule{{Collective: "allreduce", Steps: []TuneStep{{From: 8, Algo: "linear"}}}}}
	b := a
	b.TuneKey = TuneKey{Hosts: []string{"a"}, PerHost: []int{4}, Transport: "shm"}
	a2 := a
	a2.Rules = []TuneRule{{Collective: "allreduce", Steps: []TuneStep{{From: 8, Algo: "ring"}}}}
	for _, tab := range []TuneTable{a, b, a2} {
		if err := SaveTuneTable(path, tab); err != nil {
			t.Fatal(err)
		}
	}
	f, err := ReadTuneFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tables) != 2 || f.Lookup(a.TuneKey).Rules[0].Steps[0].Algo != "ring" || f.Lookup(b.TuneKey) == nil {
		t.Errorf("after saving a, b, a again: %+v", f.Tables)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("%d files beside the table, want none", len(ents)-1)
	}
	if err := os.WriteFile(path, []byte("garbage = ["), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SaveTuneTable(path, a); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("saving over garbage: %v", err)
	}
}

// writeTable writes a file with one table for key whose one rule makes
// coll use algo at every size.
func writeTable(t *testing.T, path string, key TuneKey, coll topo.Collective, algo topo.Algo) {
	t.Helper()
	tab := TuneTable{TuneKey: key, MeasuredOn: "test",
		Rules: []TuneRule{{Collective: coll.String(), Steps: []TuneStep{{From: 8, Algo: string(algo)}}}}}
	if err := SaveTuneTable(path, tab); err != nil {
		t.Fatal(err)
	}
}

// chooseOn2 runs 2 ranks that each write what Choose picks for coll at
// bytes, after rank 0 has written its table (key: the ranks', from
// setup), and the model's choice.
func chooseOn2(t *testing.T, setup func(key TuneKey), coll topo.Collective, bytes int) (got [2]topo.Algo, model topo.Algo) {
	t.Helper()
	got, model, _ = chooseProbed(t, setup, coll, bytes)
	return got, model
}

// chooseProbed is chooseOn2, and says whether Choose fitted the model on
// each rank.
func chooseProbed(t *testing.T, setup func(key TuneKey), coll topo.Collective, bytes int) (got [2]topo.Algo, model topo.Algo, probed [2]bool) {
	t.Helper()
	var once sync.Once
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		if w.Rank() == 0 {
			once.Do(func() { setup(tuneKeyOf(w.Comm)) })
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		a, err := Choose(ctx, w.Comm, coll, bytes)
		if err != nil {
			return err
		}
		got[w.Rank()] = a
		_, probed[w.Rank()] = topo.Cached(w.Comm)
		m, err := topo.ModelFor(ctx, w.Comm)
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			model = Cheapest(m, coll, 2, bytes, topo.LayoutOf(w.Comm))
		}
		return nil
	})
	return got, model, probed
}

// Choose follows a table that contradicts the model, for the collective
// it covers; GORUN_ALGO still wins over it.
func TestChooseFollowsTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tune.toml")
	t.Setenv(contract.EnvTuneFile, path)
	setup := func(key TuneKey) { writeTable(t, path, key, topo.AllReduce, topo.Linear) }
	got, model, probed := chooseProbed(t, setup, topo.AllReduce, 1<<10)
	if model == topo.Linear {
		t.Fatalf("the model picks linear too: the test shows nothing")
	}
	if got != [2]topo.Algo{topo.Linear, topo.Linear} {
		t.Errorf("with a table of linear, Choose(allreduce, 1 KiB) = %v (model: %s)", got, model)
	}
	if probed != [2]bool{} {
		t.Errorf("Choose(allreduce), which the table decides, probed the links: %v", probed)
	}
	got, model, probed = chooseProbed(t, setup, topo.Broadcast, 1<<10)
	if got != [2]topo.Algo{model, model} {
		t.Errorf("Choose(broadcast), which the table does not cover, = %v, want the model's %s", got, model)
	}
	if probed != [2]bool{true, true} {
		t.Errorf("Choose(broadcast), which the table does not cover, probed on ranks %v, want both", probed)
	}
	t.Setenv(contract.EnvAlgo, "tree")
	if got, _ := chooseOn2(t, setup, topo.AllReduce, 1<<10); got != [2]topo.Algo{topo.Tree, topo.Tree} {
		t.Errorf("with GORUN_ALGO=tree, Choose(allreduce) = %v", got)
	}
}

// GORUN_TUNE_FILE=none turns the tables off.
func TestChooseTableOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gorun", "tune.toml")
	t.Setenv("XDG_CACHE_HOME", filepath.Dir(filepath.Dir(path)))
	t.Setenv(contract.EnvTuneFile, "none")
	if TuneFilePath() != "" {
		t.Fatalf("TuneFilePath() = %q with %s=none", TuneFilePath(), contract.EnvTuneFile)
	}
	setup := func(key TuneKey) { writeTable(t, path, key, topo.AllReduce, topo.Linear) }
	if got, model := chooseOn2(t, setup, topo.AllReduce, 1<<10); got != [2]topo.Algo{model, model} {
		t.Errorf("with %s=none and a table in the cache, Choose = %v, want the model's %s", contract.EnvTuneFile, got, model)
	}
	t.Setenv(contract.EnvTuneFile, "")
	if TuneFilePath() != path {
		t.Errorf("TuneFilePath() = %q, want %q under XDG_CACHE_HOME", TuneFilePath(), path)
	}
}

// Every rank follows rank 0's table, whatever its own file says.
func TestChooseTableOfRank0(t *testing.T) {
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "rank0.toml"), filepath.Join(dir, "rank1.toml")}
	old := tuneFileOf
	tuneFileOf = func(c *spmd.Comm) string { return paths[min(c.Rank(), 1)] }
	t.Cleanup(func() { tuneFileOf = old })
	setup := func(key TuneKey) {
		writeTable(t, paths[0], key, topo.AllReduce, topo.Linear)
		writeTable(t, paths[1], key, topo.AllReduce, topo.Tree)
	}
	if got, _ := chooseOn2(t, setup, topo.AllReduce, 1<<10); got != [2]topo.Algo{topo.Linear, topo.Linear} {
		t.Errorf("rank 0's table says linear, rank 1's tree: Choose = %v", got)
	}
}

// A file that cannot be used leaves the choice to the model, and fails
// nothing.
func TestChooseBadTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tune.toml")
	t.Setenv(contract.EnvTuneFile, path)
	setup := func(TuneKey) {
		if err := os.WriteFile(path, []byte("version = 1\n[[table]]\nhosts = 3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, model := chooseOn2(t, setup, topo.AllReduce, 1<<10); got != [2]topo.Algo{model, model} {
		t.Errorf("with a corrupt table, Choose = %v, want the model's %s", got, model)
	}
}

// Tune measures every collective and keeps, per size, an algorithm that
// applies; its table passes Validate.
func TestTune(t *testing.T) {
	cfg := TuneConfig{MinBytes: 8, MaxBytes: 512, Factor: 8, Rounds: 1, ConfirmCalls: 20}
	var tn Tuning
	spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
		got, err := Tune(ctx, w.Comm, cfg)
		if w.Rank() == 0 {
			tn = got
		}
		return err
	})
	if len(tn.Points) == 0 || len(tn.Table.Rules) == 0 || tn.Table.Ranks() != 3 {
		t.Fatalf("tuned %+v", tn)
	}
	f := &TuneFile{Version: TuneVersion, Tables: []TuneTable{tn.Table}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, pt := range tn.Points {
		if best, _ := pt.Best(); !Applies(pt.Coll, best) || !Applies(pt.Coll, pt.Pick()) {
			t.Errorf("%s at %d: picked %s", pt.Coll, pt.Bytes, best)
		}
		if pt.Kept != pt.Pick() && pt.Kept != pt.Model || pt.Kept == pt.Model && pt.Pick() != pt.Model && len(pt.Confirm) != 2 {
			t.Errorf("%s at %d: kept %s, picked %s, model %s, longer runs %v", pt.Coll, pt.Bytes, pt.Kept, pt.Pick(), pt.Model, pt.Confirm)
		}
	}
}

// TestConfirm: where the sweep's pick differs from the model's choice,
// every rank times the two again and rank 0 keeps the model unless the
// pick beats it by more than TuneTie; where they agree, nothing is timed.
func TestConfirm(t *testing.T) {
	algos := []topo.Algo{topo.Tree, topo.Linear, topo.Ring}
	for _, tt := range []struct {
		name        string
		model, pick topo.Algo
		timed       bool
	}{
		{"the pick beat the model", topo.Tree, topo.Linear, true},
		{"the model kept", topo.Ring, topo.Ring, false},
		{"the model not measured", topo.Shared, topo.Linear, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got TunePoint
			spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
				send, recv := make([]float32, 1024), make([]float32, 1024)
				var pt TunePoint
				if w.Rank() == 0 {
					pt = TunePoint{Coll: topo.Broadcast, Model: tt.model, Kept: tt.pick}
				}
				err := confirm(ctx, w.Comm, topo.Broadcast, &pt, algos, 256, send, recv, 20)
				if w.Rank() == 0 {
					got = pt
				}
				return err
			})
			if timed := len(got.Confirm) == 2; timed != tt.timed {
				t.Fatalf("longer runs %v, want timed %v", got.Confirm, tt.timed)
			}
			switch {
			case !tt.timed && got.Kept != tt.pick:
				t.Errorf("kept %s untimed, want the pick %s", got.Kept, tt.pick)
			case tt.timed && got.Confirm[0] <= got.Confirm[1]*TuneTie && got.Kept != tt.model:
				t.Errorf("kept %s, though the model measured %v", got.Kept, got.Confirm)
			case tt.timed && got.Confirm[0] > got.Confirm[1]*TuneTie && got.Kept != tt.pick:
				t.Errorf("kept %s, though the pick measured %v", got.Kept, got.Confirm)
			}
		})
	}
}

// The largest table a file may hold fits the message that carries it.
func TestTunedLen(t *testing.T) {
	full := &tuned{}
	for coll := range full.steps {
		for i := range maxSteps {
			full.steps[coll] = append(full.steps[coll], tunedStep{1 << i, Algos(topo.Collective(coll))[0]})
		}
	}
	if n := len(encodeTuned(full)); n > tunedLen {
		t.Errorf("a full table encodes to %d bytes, more than tunedLen %d", n, tunedLen)
	}
}

func TestTuneTransport(t *testing.T) {
	shared := topo.Uniform(1, 4)
	shared.Shared = true
	tests := []struct {
		name string
		lay  topo.Layout
		env  string
		want string
	}{
		{"one host, shared", shared, "", "shm"},
		{"one host, not shared", topo.Uniform(1, 4), "", "tcp"},
		{"one host, forced tcp", shared, "tcp", "tcp"},
		{"hosts of several", topo.Uniform(2, 2), "", "shm+tcp"},
		{"hosts of one", topo.Uniform(3, 1), "", "tcp"},
		{"hosts, forced tcp", topo.Uniform(2, 2), "tcp", "tcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(contract.EnvTransport, tt.env)
			if got := tuneTransport(tt.lay); got != tt.want {
				t.Errorf("tuneTransport = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTuneKeyOutlivesReboot: this machine's host id holds the boot id;
// the key names the machine by its machine id instead, and the hosts of a
// host list by their ids.
func TestTuneKeyOutlivesReboot(t *testing.T) {
	local := contract.LocalHostID()
	spmdtest.RunHosts(t, []string{local, local, "node7"}, func(ctx context.Context, w *spmd.World) error {
		k := tuneKeyOf(w.Comm)
		want := []string{contract.MachineName(), "node7"}
		if !slices.Equal(k.Hosts, want) || !slices.Equal(k.PerHost, []int{2, 1}) {
			return fmt.Errorf("key %v, want hosts %v with 2 and 1 ranks", k, want)
		}
		if lay := topo.LayoutOf(w.Comm); lay.HostIDs[0] != local {
			return fmt.Errorf("the key changed the layout's host ids: %v", lay.HostIDs)
		}
		return nil
	})
}

// TestTuneFileMissing: a missing file that GORUN_TUNE_FILE names is an
// error that says how to make it, except while tuning, which writes it.
func TestTuneFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none-yet.toml")
	t.Setenv(contract.EnvTuneFile, path)
	var fc fileCache
	if f, err := fc.read(path); f != nil || err == nil || !strings.Contains(err.Error(), "does not exist: run gorun --tune") {
		t.Errorf("read of a missing named file: %v, %v", f, err)
	}
	tuning.Store(true)
	defer tuning.Store(false)
	if f, err := fc.read(path); f != nil || err != nil {
		t.Errorf("read of a missing file while tuning: %v, %v", f, err)
	}
	t.Setenv(contract.EnvTuneFile, "")
	tuning.Store(false)
	if f, err := fc.read(path); f != nil || err != nil {
		t.Errorf("read of the missing default file: %v, %v", f, err)
	}
}

// TestTuneReport: the report names each rank's host as the table's key
// does, carries every time, and the longer run under the two algorithms
// it timed; its layout is the one measured.
func TestTuneReport(t *testing.T) {
	lay := topo.FromHostIDs([]string{"id-b", "id-b", "id-c"})
	tn := Tuning{
		Table:  TuneTable{TuneKey: TuneKey{Hosts: []string{"hb", "hc"}, PerHost: []int{2, 1}, Transport: "shm+tcp"}},
		Model:  topo.DefaultModel(),
		Layout: lay,
		Points: []TunePoint{
			{Coll: topo.AllReduce, Bytes: 8, Algos: []topo.Algo{topo.Ring, topo.Tree}, Seconds: []float64{2, 1}, Model: topo.Ring, Kept: topo.Ring, Confirm: []float64{1, 1.02}},
			{Coll: topo.Broadcast, Bytes: 64, Algos: []topo.Algo{topo.Tree, topo.Linear}, Seconds: []float64{1, 3}, Model: topo.Tree, Kept: topo.Tree},
		},
	}
	r := tn.Report()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.RankHosts, []string{"hb", "hb", "hc"}) || r.SharedMemory {
		t.Errorf("rank hosts %v, shared memory %v", r.RankHosts, r.SharedMemory)
	}
	ar, bc := r.Points[0], r.Points[1]
	if ar.Collective != "allreduce" || ar.Seconds["ring"] != 2 || ar.Seconds["tree"] != 1 || ar.LongerRun["ring"] != 1 || ar.LongerRun["tree"] != 1.02 {
		t.Errorf("all-reduce point %+v", ar)
	}
	if bc.LongerRun != nil || bc.Kept != "tree" || bc.Model != "tree" {
		t.Errorf("broadcast point %+v", bc)
	}
	if got := r.Layout(); !slices.EqualFunc(got.Hosts, lay.Hosts, slices.Equal[[]int]) || got.Shared {
		t.Errorf("layout %v, measured %v", got.Hosts, lay.Hosts)
	}
	r.RankHosts = r.RankHosts[:1]
	if r.Check() == nil {
		t.Error("a report of one rank checked")
	}
}

// TestBudgeted: rank 0's warm-up times decide every rank's calls a timing:
// iters where they fit the budget, fewer where they would not, never
// under minTimed (nor over iters).
func TestBudgeted(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	for _, tc := range []struct {
		fastest []time.Duration
		iters   int
		budget  time.Duration
		want    []int
	}{
		{[]time.Duration{7 * us, 5 * us}, 200, sweepBudget, []int{200, 200}},
		{[]time.Duration{ms, 7 * us}, 200, 50 * ms, []int{50, 200}},
		{[]time.Duration{20 * ms, 0}, 200, 50 * ms, []int{minTimed, 200}},
		{[]time.Duration{20 * ms}, 4, 50 * ms, []int{4}},
		{[]time.Duration{250 * us}, 2000, confirmBudget, []int{2000}},
		{[]time.Duration{ms}, 2000, confirmBudget, []int{500}},
	} {
		spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
			fastest := tc.fastest
			if w.Rank() != 0 { // the others' times do not count
				fastest = make([]time.Duration, len(tc.fastest))
			}
			n, err := budgeted(ctx, w.Comm, fastest, tc.iters, tc.budget)
			if err != nil {
				return err
			}
			if !slices.Equal(n, tc.want) {
				t.Errorf("rank %d: %v calls of %d in %v: %v, want %v", w.Rank(), tc.fastest, tc.iters, tc.budget, n, tc.want)
			}
			return nil
		})
	}
}
