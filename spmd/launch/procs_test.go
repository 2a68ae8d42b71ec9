package launch

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// TestShareProcs: each rank gets the CPUs divided by the ranks that share
// them, at least 2 (1 over TCP alone), and GOMAXPROCS is left alone (0)
// where that is all of them.
func TestShareProcs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cpus, ranks int
		tcp         bool // over TCP alone: at least 1
		want        int
	}{
		{"a rank per core", 16, 16, false, 2},
		{"two cores each", 16, 8, false, 2},
		{"rounded down", 16, 3, false, 5},
		{"more ranks than cpus", 4, 8, false, 2},
		{"two cpus", 2, 4, false, 0},
		{"one rank", 16, 1, false, 0},
		{"one cpu: 2 all the same", 1, 4, false, 2},
		{"bound to a core", 1, 1, false, 2},
		{"bound to a core of 2 threads", 2, 1, false, 0},
		{"no local size", 16, 0, false, 0},
		{"tcp: a rank per core", 16, 16, true, 1},
		{"tcp: two cores each", 16, 8, true, 2},
		{"tcp: 2 ranks on 2 cpus", 2, 2, true, 1},
		{"tcp: more ranks than cpus", 4, 8, true, 1},
		{"tcp: bound to a core, Go's own 1", 1, 1, true, 0},
		{"tcp: one rank", 16, 1, true, 0},
	} {
		if got := shareProcs(tc.cpus, tc.ranks, tc.tcp); got != tc.want {
			t.Errorf("%s: shareProcs(%d cpus, %d ranks, tcp %v) = %d, want %d", tc.name, tc.cpus, tc.ranks, tc.tcp, got, tc.want)
		}
	}
}

// TestProcsEnv: what a starter gives the rank, from the host's CPUs or
// its binding, unless the user chose (the plan says) or the starter's own
// environment sets GOMAXPROCS.
func TestProcsEnv(t *testing.T) {
	share := rankPlan{ShareProcs: true}
	size := func(n int) []string { return []string{fmt.Sprintf("%s=%d", contract.EnvLocalSize, n)} }
	bound := func(cpus, ranks int) binding {
		b := binding{ranks: ranks}
		for c := range cpus {
			b.cpus = append(b.cpus, c)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		env      []string
		rp       rankPlan
		b        binding
		hostCPUs int
		want     string // GOMAXPROCS in the rank's environment; "" unset
	}{
		{"16 ranks on 16 cpus", size(16), share, binding{}, 16, "2"},
		{"4 ranks on 16 cpus", size(4), share, binding{}, 16, "4"},
		{"4 ranks on 2 cpus: 2 is all of them", size(4), share, binding{}, 2, ""},
		{"8 ranks on 4 cpus", size(8), share, binding{}, 4, "2"},
		{"one rank", size(1), share, binding{}, 16, ""},
		{"the user chose", size(16), rankPlan{}, binding{}, 16, ""},
		{"the agent's environment sets it", append(size(16), "GOMAXPROCS=3"), share, binding{}, 16, "3"},
		{"set empty", append(size(16), "GOMAXPROCS="), share, binding{}, 16, "2"},
		{"8 ranks bound to a socket of 8 cpus", size(16), share, bound(8, 8), 16, "2"},
		{"2 ranks bound to a socket of 8 cpus", size(4), share, bound(8, 2), 16, "4"},
		{"bound to a core of its own", size(16), share, bound(2, 1), 32, ""},
		{"16 ranks on 16 cpus over tcp", append(size(16), "GORUN_TRANSPORT=tcp"), share, binding{}, 16, "1"},
		{"2 ranks on 2 cpus over tcp", append(size(2), "GORUN_TRANSPORT=tcp"), share, binding{}, 2, "1"},
		{"bound to a cpu of its own over tcp", append(size(2), "GORUN_TRANSPORT=tcp"), share, bound(1, 1), 2, ""},
		{"bound to a cpu of its own over shm", append(size(2), "GORUN_TRANSPORT=shm"), share, bound(1, 1), 2, "2"},
	} {
		env := procsEnv(tc.env, tc.rp, tc.b, tc.hostCPUs)
		if got, _ := envValue(env, contract.EnvGoMaxProcs); got != tc.want {
			t.Errorf("%s: GOMAXPROCS=%q, want %q (%v)", tc.name, got, tc.want, env)
		}
	}
}

// TestBoundShare: the ranks bound to one unit share its CPUs.
func TestBoundShare(t *testing.T) {
	for _, tc := range []struct {
		policy      string
		local, size int
		want        int
	}{
		{"socket", 0, 4, 2},                  // 2 ranks on the 4 cpus of socket 0
		{"socket", 1, 3, 0},                  // alone on socket 1: all of its 4 cpus
		{"socket:overload-allowed", 0, 8, 2}, // 4 ranks on 4 cpus: at least 2
		{"core", 1, 4, 0},                    // a core of 2 cpus each
		{"core:overload-allowed", 0, 8, 0},   // 2 ranks on a core of 2 cpus: 2 is all of them
	} {
		env := bindEnv(tc.policy, tc.local, tc.size, false)
		b, err := bindingFor(env, twoSockets, "h", "")
		if err != nil {
			t.Fatal(err)
		}
		if got := rankShare(env, b, 8).procs; got != tc.want {
			t.Errorf("%s rank %d of %d: GOMAXPROCS %d, want %d", tc.policy, tc.local, tc.size, got, tc.want)
		}
	}
}

// TestPlanShareProcs: the plan leaves GOMAXPROCS to the starter unless
// the user chose: in gorun's environment, with -x for the job, with or
// without a value, or with -x for one program of an MPMD job.
func TestPlanShareProcs(t *testing.T) {
	none := func(string) string { return "" }
	set := func(k string) string { return map[string]string{"GOMAXPROCS": "2"}[k] }
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		export []string
		apps   []App // after the first, of 2 ranks
		want   string
	}{
		{"nobody chose", none, nil, nil, "true true"},
		{"in gorun's environment", set, nil, nil, "false false"},
		{"-x with a value", none, []string{"GOMAXPROCS=3"}, nil, "false false"},
		{"-x passing gorun's", set, []string{"GOMAXPROCS"}, nil, "false false"},
		{"-x of an unset variable", none, []string{"GOMAXPROCS"}, nil, "false false"},
		{"-x of another", none, []string{"GOMAXPROCSX=1"}, nil, "true true"},
		{"per program", none, nil, []App{{NP: 2, Program: "b", Export: []string{"GOMAXPROCS=2"}}}, "true true false false"},
		{"per program, unset", none, nil, []App{{NP: 2, Program: "b", Export: []string{"GOMAXPROCS"}}}, "true true false false"},
		{"for the job", none, []string{"GOMAXPROCS=2"}, []App{{NP: 2, Program: "b"}}, "false false false false"},
	} {
		cfg := DefaultConfig()
		cfg.NP, cfg.Program, cfg.Export, cfg.Apps = 2, "a", tc.export, tc.apps
		if err := cfg.countApps(); err != nil {
			t.Fatal(err)
		}
		job := testJob()
		job.Getenv = tc.getenv
		plan, err := newPlan(&cfg, job, sameHost(cfg.NP, "a"))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, rp := range plan.Ranks {
			got = append(got, fmt.Sprint(rp.ShareProcs))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: ShareProcs per rank %s, want %s", tc.name, strings.Join(got, " "), tc.want)
		}
	}
}

// TestProcsNotice: one line for the job, from the first host the rule
// gives a share, counting the others.
func TestProcsNotice(t *testing.T) {
	const tail = "; set GOMAXPROCS to choose another"
	plan := func(hosts ...string) *jobPlan { return planOn(t, hosts...) }
	cpus := func(m map[string]int) func(string) (int, int, bool) {
		return func(h string) (int, int, bool) { return m[h], m[h+" cores"], h == "a" }
	}
	a16 := make([]string, 16)
	for i := range a16 {
		a16[i] = "a"
	}
	program := func(p *jobPlan, path string) *jobPlan {
		p.Apps[0].Program = path
		return p
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		plan   *jobPlan
		policy string
		cpus   map[string]int
		want   string
	}{
		{"16 ranks on 16 cpus here", plan(a16...), "none", map[string]int{"a": 16},
			"GOMAXPROCS=2 for each of 16 ranks on 16 CPUs of this host" + tail},
		{"one rank", plan("a"), "none", map[string]int{"a": 16}, ""},
		// GOMAXPROCS does not concern a program of this machine that is
		// not a Go binary; this test's binary is one.
		{"a shell's ranks", program(plan(a16...), "/bin/sh"), "none", map[string]int{"a": 16}, ""},
		{"a Go binary's ranks", program(plan(a16...), self), "none", map[string]int{"a": 16},
			"GOMAXPROCS=2 for each of 16 ranks on 16 CPUs of this host" + tail},
		{"a remote host", plan("b", "b", "b", "b"), "none", map[string]int{"b": 16},
			"GOMAXPROCS=4 for each of 4 ranks on 16 CPUs of host b" + tail},
		{"one rank a host", plan("a", "b"), "none", map[string]int{"a": 16, "b": 16}, ""},
		{"two hosts", plan("b", "b", "c", "c"), "none", map[string]int{"b": 4, "c": 8},
			"GOMAXPROCS=2 for each of 2 ranks on 4 CPUs of host b, and likewise by their own CPUs on 1 more host" + tail},
		{"two hosts, one with too few cpus to share", plan("b", "b", "c", "c"), "none", map[string]int{"b": 2, "c": 8},
			"GOMAXPROCS=4 for each of 2 ranks on 8 CPUs of host c" + tail},
		{"an agent older than the rule", plan("b", "b"), "none", nil, ""},
		{"bound to a socket elsewhere", plan("b", "b"), "socket", map[string]int{"b": 16},
			"GOMAXPROCS for each bound rank on 1 host: the CPUs of its binding divided by the ranks bound to them, at least 2" + tail},
		{"bound to cores elsewhere", plan("b", "b"), "core", map[string]int{"b": 16},
			"GOMAXPROCS for each bound rank on 1 host: the CPUs of its binding divided by the ranks bound to them, at least 2" + tail},
		{"auto elsewhere: the unbound share", plan("b", "b"), "auto", map[string]int{"b": 16, "b cores": 16},
			"GOMAXPROCS=8 for each of 2 ranks on 16 CPUs of host b" + tail},
		// The host's agent binds a rank to each of its 2 cores, as gorun
		// would here: each bound rank gets 2 (it said nothing, taking
		// the unbound share, all of the 2 CPUs).
		{"auto elsewhere: bound to a core each", plan("b", "b"), "auto", map[string]int{"b": 2, "b cores": 2},
			"GOMAXPROCS=2 for each of 2 ranks of host b, each bound to 1 CPU of its own" + tail},
		{"auto elsewhere: bound to a core of 2 threads each", plan("b", "b"), "auto", map[string]int{"b": 4, "b cores": 2}, ""},
		{"auto elsewhere: an agent that did not say its cores", plan("b", "b"), "auto", map[string]int{"b": 2}, ""},
		{"one rank bound here", plan("a"), "core", map[string]int{"a": 16},
			"GOMAXPROCS=2 for 1 rank of this host, bound to 1 CPU of its own" + tail},
		{"16 ranks bound here", plan(a16...), "core", map[string]int{"a": 16},
			"GOMAXPROCS=2 for each of 16 ranks of this host, each bound to 1 CPU of its own" + tail},
		// 17 ranks do not fit the 16 cores: the job does not start
		// (checkBindings), and gorun says nothing of the one rank that
		// could be bound.
		{"bound here, one too many", plan(append(a16, "a")...), "core", map[string]int{"a": 16}, ""},
	} {
		policy, _ := parseBindPolicy(tc.policy)
		for i := range tc.plan.Ranks { // as the plan sets it for every policy but auto
			tc.plan.Ranks[i].Env = append(tc.plan.Ranks[i].Env, contract.EnvBindTo+"="+tc.policy)
		}
		if got := procsNotice(foreseeShares(tc.plan, policy, cpus(tc.cpus), flatCPUs(16))); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckBindings: a rank of this machine that --bind-to cannot bind
// fails the job before it starts; a rank of another host is its agent's
// to judge.
func TestCheckBindings(t *testing.T) {
	local := map[string]bool{"a": true}
	for _, tc := range []struct {
		name   string
		hosts  []string
		policy string
		want   string // "" for no error
	}{
		{"fits", []string{"a", "a"}, "core", ""},
		{"overloads a core", []string{"a", "a", "a"}, "core", "--bind-to core: 3 ranks on a would put 2 on core 0"},
		{"overload allowed", []string{"a", "a", "a"}, "core:overload-allowed", ""},
		{"elsewhere", []string{"b", "b", "b"}, "core", ""},
		{"unbound", []string{"a", "a", "a"}, "none", ""},
	} {
		p := planOn(t, tc.hosts...)
		for i := range p.Ranks {
			p.Ranks[i].Env = append(p.Ranks[i].Env, contract.EnvBindTo+"="+tc.policy)
		}
		err := checkBindings(p, local, flatCPUs(2))
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestProcsNoticeTCP: over TCP alone a rank's share is at least 1, and
// the launcher foresees it from its own environment for the ranks it
// starts here; an agent elsewhere passes on only the plan's variables.
func TestProcsNoticeTCP(t *testing.T) {
	t.Setenv(contract.EnvTransport, "tcp")
	const tail = "; set GOMAXPROCS to choose another"
	a16 := make([]string, 16)
	for i := range a16 {
		a16[i] = "a"
	}
	cpus := func(h string) (int, int, bool) { return 16, 16, h == "a" }
	none, _ := parseBindPolicy("none")
	if got, want := procsNotice(foreseeShares(planOn(t, a16...), none, cpus, flatCPUs(16))), "GOMAXPROCS=1 for each of 16 ranks on 16 CPUs of this host"+tail; got != want {
		t.Errorf("here:\ngot  %q\nwant %q", got, want)
	}
	b16 := make([]string, 16)
	for i := range b16 {
		b16[i] = "b"
	}
	if got, want := procsNotice(foreseeShares(planOn(t, b16...), none, cpus, flatCPUs(16))), "GOMAXPROCS=2 for each of 16 ranks on 16 CPUs of host b"+tail; got != want {
		t.Errorf("elsewhere:\ngot  %q\nwant %q", got, want)
	}
}

// TestAgentShareProcs: an agent says how many CPUs it has, and gives the
// ranks it starts their share of them unless the plan says the user chose.
func TestAgentShareProcs(t *testing.T) {
	n := runtime.NumCPU()
	if n < 2 {
		t.Skipf("a share of 1 CPU is all of it: this machine has %d", n)
	}
	t.Setenv("GOMAXPROCS", "") // the agent's own environment sets none
	p := startAgent(t)
	p.next(frameHello)
	p.send(jsonFrame(frameSetup, 1, 0, setupMsg{Name: "h1", Seed: "127.0.0.1", KillGrace: time.Second}))
	var ready readyMsg
	if err := p.next(frameReady).decode(&ready); err != nil || ready.CPUs != n || ready.Cores != hostCores() {
		t.Fatalf("ready = %+v, %v; want %d CPUs and %d cores", ready, err, n, hostCores())
	}
	for rank, share := range []bool{true, false} {
		env := []string{fmt.Sprintf("%s=%d", contract.EnvLocalSize, 2*n)}
		p.send(jsonFrame(frameStart, 1, rank, startMsg{Path: "/bin/sh", Args: []string{"-c", `echo "GOMAXPROCS=$GOMAXPROCS"`},
			Env: env, ShareProcs: share}))
		var out strings.Builder
		for done := false; !done; {
			f, err := p.frame()
			if err != nil {
				t.Fatal(err)
			}
			switch f.Type {
			case frameOutput:
				out.Write(f.Payload[1:])
			case frameExited:
				done = true
			}
		}
		want := "GOMAXPROCS=\n"
		if procs := shareProcs(n, 2*n, false); share && procs > 0 {
			want = fmt.Sprintf("GOMAXPROCS=%d\n", procs)
		}
		if out.String() != want {
			t.Errorf("ShareProcs %v: the rank said %q, want %q", share, out.String(), want)
		}
	}
}
