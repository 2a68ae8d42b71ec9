package launch

import (
	"bytes"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// planOn is the plan of a job of program p with a rank on each of hosts,
// in order, under the default configuration.
func planOn(t *testing.T, hosts ...string) *jobPlan {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NP, cfg.Program = len(hosts), "p"
	p, err := newPlan(&cfg, testJob(), hosts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testJob() jobInfo {
	return jobInfo{
		ID:         "0123456789abcdef",
		Seeds:      []string{"127.0.0.1:7946"},
		HostIDs:    map[string]string{"a": "a:0badf00d", "b": "b:deadbeef"},
		MasterAddr: "127.0.0.1",
		MasterPort: 29500,
		Getenv:     func(k string) string { return map[string]string{"HOME": "/home/u"}[k] },
	}
}

func TestPlanGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		hosts []string
		slurm bool // inside a Slurm allocation
	}{
		{"local1", func(c *Config) { c.NP = 1 }, []string{"a"}, false},
		{"local4", func(c *Config) {
			c.NP, c.Export = 4, []string{"OMP_NUM_THREADS=1", "HOME", "UNSET_VAR"}
			c.Verbose, c.ProfileDir, c.InitTimeout = true, "/tmp/prof", Duration(30*time.Second)
		}, []string{"a", "a", "a", "a"}, false},
		{"twohosts", func(c *Config) { c.NP = 3 }, []string{"a", "b", "a"}, false},
		{"slurm", func(c *Config) { c.NP = 4 }, []string{"a", "a", "a", "b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Program, cfg.Args = "/bin/prog", []string{"-x", "1"}
			tc.cfg(&cfg)
			job := testJob()
			job.Slurm = tc.slurm
			plan, err := newPlan(&cfg, job, tc.hosts)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := plan.Format(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", tc.name+".plan"), b.Bytes())
		})
	}
}

func TestPlanRanks(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NP, cfg.Program = 4, "p"
	plan, err := newPlan(&cfg, testJob(), []string{"b", "a", "b", "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		host            string
		local, node, ls int
	}{{"b", 0, 0, 3}, {"a", 0, 1, 1}, {"b", 1, 0, 3}, {"b", 2, 0, 3}}
	for i, w := range want {
		r := plan.Ranks[i]
		if r.Rank != i || r.Host != w.host || r.LocalRank != w.local || r.NodeRank != w.node {
			t.Errorf("rank %d = %+v, want %+v", i, r, w)
		}
		env := strings.Join(r.Env, "\n")
		if !strings.Contains(env, "GORUN_LOCAL_SIZE="+string(rune('0'+w.ls))) || !strings.Contains(env, "GORUN_NODE_COUNT=2") {
			t.Errorf("rank %d env:\n%s", i, env)
		}
	}
	if _, err := newPlan(&cfg, testJob(), []string{"a"}); err == nil {
		t.Error("NewPlan with too few hosts did not fail")
	}
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update if the change is intended):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestOMPShared: gorun sets OMP_NUM_THREADS=1 as torchrun does, when ranks
// share a host and the user chose no value, in the environment or with -x.
func TestOMPShared(t *testing.T) {
	none := func(string) string { return "" }
	set := func(k string) string {
		if k == "OMP_NUM_THREADS" {
			return "4"
		}
		return ""
	}
	for _, tc := range []struct {
		name    string
		local   int
		exports map[string]string
		getenv  func(string) string
		want    bool
	}{
		{"two ranks", 2, nil, none, true},
		{"one rank", 1, nil, none, false},
		{"in the environment", 2, nil, set, false},
		{"exported", 2, map[string]string{"OMP_NUM_THREADS": "2"}, none, false},
	} {
		if got := ompShared(tc.local, tc.getenv, nil, tc.exports); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlanSetsOMP: the launcher's line about OMP_NUM_THREADS follows what
// gorun set, not what the user exported with -x (job-wide or for one
// program of an MPMD job), which the ranks get as given.
func TestPlanSetsOMP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		export  []string
		apps    []App
		want    bool
		wantEnv []string // per rank
	}{
		{"unset", nil, nil, true, []string{"1", "1"}},
		{"-x", []string{"OMP_NUM_THREADS=3"}, nil, false, []string{"3", "3"}},
		{"-x of one program", nil, []App{{NP: 1, Program: "a", Export: []string{"OMP_NUM_THREADS=4"}}, {NP: 1, Program: "b"}}, true, []string{"4", "1"}},
		{"-x of every program", nil, []App{{NP: 1, Program: "a", Export: []string{"OMP_NUM_THREADS=4"}}, {NP: 1, Program: "b", Export: []string{"OMP_NUM_THREADS=2"}}}, false, []string{"4", "2"}},
	} {
		cfg := Config{NP: 2, Program: "a", Export: tc.export}
		cfg.apps = tc.apps
		job := testJob()
		job.Getenv = func(string) string { return "" }
		p, err := newPlan(&cfg, job, sameHost(2, "h"))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := p.SetsOMP(); got != tc.want {
			t.Errorf("%s: SetsOMP %v, want %v", tc.name, got, tc.want)
		}
		for r, want := range tc.wantEnv {
			if got := envOf(p.Ranks[r].Env, "OMP_NUM_THREADS"); got != want {
				t.Errorf("%s: rank %d OMP_NUM_THREADS=%q, want %q", tc.name, r, got, want)
			}
		}
	}
}

func envOf(env []string, name string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// TestFreePortEveryAddress: MASTER_PORT is free on every address, as
// PyTorch's TCPStore binds it on [::] and 0.0.0.0; a port free on
// 127.0.0.1 but held on another address was handed out.
func TestFreePortEveryAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	defer ln.Close()
	p := ln.Addr().(*net.TCPAddr).Port
	if got := freePort("", contract.PortRange{Low: p, High: p}); got != 0 {
		t.Errorf("freePort gave %d, held on 127.0.0.2", got)
	}
	if got := freePort("", contract.PortRange{}); got == 0 {
		t.Errorf("freePort found no port at all")
	}
}

// TestPythonUnbuffered: gorun sets PYTHONUNBUFFERED=1, so that a Python
// rank's prints reach gorun as they are made (its stdout is a pipe, which
// Python buffers: the prints of a rank that the job's stop killed were
// lost), unless the user chose a value, in the environment or with -x
// (PYTHONUNBUFFERED= keeps the buffering).
func TestPythonUnbuffered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		export []string
		want   string
	}{
		{"default", nil, nil, "1"},
		{"in the environment", map[string]string{"PYTHONUNBUFFERED": "x"}, nil, ""}, // inherited, not set
		{"-x empty", nil, []string{"PYTHONUNBUFFERED="}, ""},
	} {
		cfg := Config{NP: 1, Program: "a", Export: tc.export}
		job := testJob()
		job.Getenv = func(k string) string { return tc.env[k] }
		p, err := newPlan(&cfg, job, sameHost(1, "h"))
		if err != nil {
			t.Fatal(err)
		}
		if got := envOf(p.Ranks[0].Env, "PYTHONUNBUFFERED"); got != tc.want {
			t.Errorf("%s: PYTHONUNBUFFERED=%q, want %q", tc.name, got, tc.want)
		}
	}
}
