package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"golang.org/x/sys/unix"
)

func TestParseBindPolicy(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"", "auto", ""},
		{"auto", "auto", ""},
		{"none", "none", ""},
		{"core", "core", ""},
		{"hwthread", "hwthread", ""},
		{"socket", "socket", ""},
		{"package", "socket", ""},
		{"core:overload-allowed", "core:overload-allowed", ""},
		{"numa", "", `"numa": want auto, none, hwthread, core or socket`},
		{"auto:overload-allowed", "", "the one qualifier"},
		{"core:overload", "", "the one qualifier is :overload-allowed"},
		{"none:overload-allowed", "", "the one qualifier"},
	} {
		p, err := parseBindPolicy(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseBindPolicy(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("ParseBindPolicy(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
		}
	}
}

// twoSockets is 2 sockets of 2 cores of 2 hardware threads, numbered as
// Linux numbers them: cpus 0-3 are the first thread of each core, 4-7
// their siblings.
func twoSockets() ([]cpuInfo, error) {
	var cpus []cpuInfo
	for c := 0; c < 8; c++ {
		core := c % 4
		cpus = append(cpus, cpuInfo{cpu: c, core: core % 2, socket: core / 2})
	}
	return cpus, nil
}

func TestBindUnits(t *testing.T) {
	cpus, _ := twoSockets()
	for _, tc := range []struct {
		unit  string
		want  string
		cores []int
	}{
		{"hwthread", "[[0] [1] [2] [3] [4] [5] [6] [7]]", []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{"core", "[[0 4] [1 5] [2 6] [3 7]]", []int{1, 1, 1, 1}},
		{"socket", "[[0 1 4 5] [2 3 6 7]]", []int{2, 2}},
	} {
		units := bindUnits(slices.Clone(cpus), tc.unit)
		var got [][]int
		var cores []int
		for _, u := range units {
			got = append(got, u.cpus)
			cores = append(cores, u.cores)
		}
		if fmt.Sprint(got) != tc.want || !slices.Equal(cores, tc.cores) {
			t.Errorf("%s: units %v holding %v, want %s holding %v", tc.unit, got, cores, tc.want, tc.cores)
		}
	}
}

func bindEnv(policy string, local, size int, report bool) []string {
	env := []string{
		contract.EnvLocalRank + "=0", // overridden below: the last setting wins
		contract.EnvBindTo + "=" + policy,
		fmt.Sprintf("%s=%d", contract.EnvLocalRank, local),
		fmt.Sprintf("%s=%d", contract.EnvLocalSize, size),
	}
	if report {
		env = append(env, contract.EnvReportBindings+"=1")
	}
	return env
}

// TestAutoBindsGoOnly: auto leaves a program that is not Go (a Python
// rank, whose OpenMP threads and DataLoader workers shared one core at
// twice the time) unbound, as torchrun does; core binds any.
func TestAutoBindsGoOnly(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	b, err := bindingFor(bindEnv("auto", 1, 4, false), twoSockets, "h", sh)
	if err != nil || b.cpus != nil || b.what != "not bound (auto binds Go programs only; --bind-to core binds any)" {
		t.Errorf("auto for %s: %v %q, %v; want not bound", sh, b.cpus, b.what, err)
	}
	if b, err := bindingFor(bindEnv("core", 1, 4, false), twoSockets, "h", sh); err != nil || !slices.Equal(b.cpus, []int{1, 5}) {
		t.Errorf("core for %s: %v %q, %v; want core 1", sh, b.cpus, b.what, err)
	}
	self, _ := os.Executable() // a Go program
	if b, err := bindingFor(bindEnv("auto", 1, 4, false), twoSockets, "h", self); err != nil || !slices.Equal(b.cpus, []int{1, 5}) {
		t.Errorf("auto for a Go program: %v %q, %v; want core 1", b.cpus, b.what, err)
	}
}

func TestBindingFor(t *testing.T) {
	for _, tc := range []struct {
		policy      string
		local, size int
		cpus        []int
		what, err   string
	}{
		{"none", 3, 4, nil, "not bound", ""},
		{"", 3, 4, []int{3, 7}, "core 3 (cpus 3,7)", ""}, // auto: 4 ranks, 4 cores
		{"auto", 1, 4, []int{1, 5}, "core 1 (cpus 1,5)", ""},
		{"auto", 2, 3, nil, "not bound (auto binds a rank to each core only where the host's ranks are as many as its cores, 2 or more)", ""}, // fewer ranks than cores
		{"auto", 2, 8, nil, "not bound (auto binds a rank to each core only where the host's ranks are as many as its cores, 2 or more)", ""}, // more ranks than cores
		{"core", 0, 4, []int{0, 4}, "core 0 (cpus 0,4)", ""},
		{"core", 3, 4, []int{3, 7}, "core 3 (cpus 3,7)", ""},
		{"hwthread", 5, 8, []int{5}, "hwthread 5 (cpu 5)", ""},
		{"socket", 1, 4, []int{2, 3, 6, 7}, "socket 1 (cpus 2-3,6-7)", ""},
		{"socket", 0, 4, []int{0, 1, 4, 5}, "socket 0 (cpus 0-1,4-5)", ""},
		{"core", 1, 5, nil, "", ""}, // core 1 holds rank 1 only
		{"core", 0, 5, nil, "", "5 ranks on h would put 2 on core 0, which holds 1"},
		{"socket", 0, 5, nil, "", "would put 3 on socket 0, which holds 2"},
		{"core:overload-allowed", 4, 5, []int{0, 4}, "core 0 (cpus 0,4)", ""},
		{"core", 4, 4, nil, "", "no valid GORUN_LOCAL_RANK"},
		{"gpu", 0, 1, nil, "", `GORUN_BIND_TO "gpu"`},
	} {
		b, err := bindingFor(bindEnv(tc.policy, tc.local, tc.size, true), twoSockets, "h", "")
		name := fmt.Sprintf("%s rank %d of %d", tc.policy, tc.local, tc.size)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tc.what != "" && (!slices.Equal(b.cpus, tc.cpus) || b.what != tc.what || !b.report || b.auto != (tc.policy == "" || tc.policy == "auto") && b.cpus != nil) {
			t.Errorf("%s: %v %q report %v, want %v %q", name, b.cpus, b.what, b.report, tc.cpus, tc.what)
		}
	}
	if b, _ := bindingFor(bindEnv("core", 0, 1, false), twoSockets, "h", ""); b.report {
		t.Errorf("report without %s", contract.EnvReportBindings)
	}
}

// flatCPUs is n CPUs, each its own core, on one socket.
func flatCPUs(n int) func() ([]cpuInfo, error) {
	return func() ([]cpuInfo, error) {
		cpus := make([]cpuInfo, n)
		for c := range cpus {
			cpus[c] = cpuInfo{cpu: c, core: c}
		}
		return cpus, nil
	}
}

// TestAutoBinds: auto binds a rank to each core where the ranks are as
// many as the cores, and those are at least autoBindMinCores; the rank's
// environment then says core, and stays as it was otherwise.
func TestAutoBinds(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cpus        func() ([]cpuInfo, error)
		ranks       int
		want        bool
		wantEnvUnit string
	}{
		{"16 ranks on 16 cores", flatCPUs(16), 16, true, "core"},
		{"4 ranks on 4 cores", flatCPUs(4), 4, true, "core"},
		{"2 ranks on 2 cores", flatCPUs(2), 2, true, "core"},
		{"1 rank on 1 core: nothing to bind", flatCPUs(1), 1, false, ""},
		{"15 ranks on 16 cores", flatCPUs(16), 15, false, ""},
		{"17 ranks on 16 cores", flatCPUs(16), 17, false, ""},
		{"4 ranks on 4 cores of 2 threads", twoSockets, 4, true, "core"},
		{"8 ranks on 4 cores of 2 threads", twoSockets, 8, false, ""},
		{"no CPUs known", func() ([]cpuInfo, error) { return nil, errNoCPUs }, 4, false, ""},
	} {
		env := []string{fmt.Sprintf("%s=%d", contract.EnvLocalRank, tc.ranks-1), fmt.Sprintf("%s=%d", contract.EnvLocalSize, tc.ranks)}
		b, err := bindingFor(env, tc.cpus, "h", "")
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if b.auto != tc.want || (b.cpus != nil) != tc.want {
			t.Errorf("%s: bound %v (%s), want %v", tc.name, b.auto, b.what, tc.want)
		}
		got, _ := envValue(boundEnv(env, b, 16), contract.EnvBindTo)
		if got != tc.wantEnvUnit {
			t.Errorf("%s: the rank's %s=%q, want %q", tc.name, contract.EnvBindTo, got, tc.wantEnvUnit)
		}
	}
}

var errNoCPUs = errors.New("no CPUs")

// TestBoundEnvHostCPUs: every rank reads the CPUs its host's ranks share,
// bound or not, unless the user set them.
func TestBoundEnvHostCPUs(t *testing.T) {
	for _, b := range []binding{{}, {auto: true, unit: "core", cpus: []int{3}}} {
		if got, _ := envValue(boundEnv([]string{"A=1"}, b, 16), contract.EnvHostCPUs); got != "16" {
			t.Errorf("binding %+v: %s=%q, want 16", b, contract.EnvHostCPUs, got)
		}
	}
	env := boundEnv([]string{contract.EnvHostCPUs + "=4"}, binding{}, 16)
	if got, _ := envValue(env, contract.EnvHostCPUs); got != "4" || len(env) != 1 {
		t.Errorf("the user's %s=4 became %v", contract.EnvHostCPUs, env)
	}
}

// TestStartBound starts a rank bound to the second CPU this process may
// use: the kernel must show the rank's allowed CPUs as that one, and the
// starting thread's own affinity must be back as it was.
func TestStartBound(t *testing.T) {
	cpus, err := hostCPUs()
	if err != nil {
		t.Skipf("no CPU affinity here: %v", err)
	}
	if len(cpus) < 2 {
		t.Skipf("binding needs 2 CPUs, this process may use %d", len(cpus))
	}
	want := cpus[1].cpu
	// Start on a thread of our own, to see its affinity before and after.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	env := append(os.Environ(), bindEnv("hwthread:overload-allowed", 1, 2, true)...)
	p, err := local{}.Start(&spec{
		Rank: rankPlan{Rank: 7}, Path: "/bin/sh", Args: []string{"-c", "grep Cpus_allowed_list /proc/self/status"},
		Env: env, Stdout: nopCloser{&out}, Stderr: nopCloser{&errOut},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedGetaffinity(0, &after); err != nil || after != before {
		t.Errorf("the starting thread may run on %d cpus after starting a bound rank, %d before (%v)", after.Count(), before.Count(), err)
	}
	if st := p.Wait(); !st.Success() {
		t.Fatalf("rank %v: %s", st, errOut.String())
	}
	if got := strings.TrimSpace(strings.TrimPrefix(out.String(), "Cpus_allowed_list:")); got != fmt.Sprint(want) {
		t.Errorf("the rank may run on cpus %q, want %d", got, want)
	}
	if !strings.Contains(errOut.String(), "gorun: rank 7 on ") || !strings.Contains(errOut.String(), fmt.Sprintf(": hwthread 1 (cpu %d)\n", want)) {
		t.Errorf("report %q", errOut.String())
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// TestAutoBindNotice: the launcher says in one line when auto binds the
// ranks of a host, this machine's by its CPUs, another's by the cores its
// agent said it has (it said nothing of other hosts), and nothing for
// other policies.
func TestAutoBindNotice(t *testing.T) {
	plan := func(hosts ...string) *jobPlan { return planOn(t, hosts...) }
	here := map[string]bool{"a": true}
	const want = "binding each of the 4 ranks of this host to a core of its own (one rank per core); --bind-to none leaves them unbound"
	for _, tc := range []struct {
		name   string
		plan   *jobPlan
		policy string
		cpus   int            // this machine's
		cores  map[string]int // what the agents said
		want   string
	}{
		{"4 ranks on 4 cores here", plan("a", "a", "a", "a"), "auto", 4, nil, want},
		{"4 ranks on 8 cores here", plan("a", "a", "a", "a"), "auto", 8, nil, ""},
		{"bound by the user", plan("a", "a", "a", "a"), "core", 4, nil, ""},
		{"on another host", plan("b", "b", "b", "b"), "auto", 8, map[string]int{"b": 4},
			"binding each of the 4 ranks of host b to a core of its own (one rank per core); --bind-to none leaves them unbound"},
		{"on another host of 8 cores", plan("b", "b", "b", "b"), "auto", 4, map[string]int{"b": 8}, ""},
		{"on an agent that did not say its cores", plan("b", "b", "b", "b"), "auto", 4, nil, ""},
		{"here and on another host", plan("a", "a", "b", "b", "c", "c"), "auto", 2, map[string]int{"b": 2, "c": 2},
			"binding each of the 2 ranks of this host to a core of its own (one rank per core), and likewise on 2 more hosts; --bind-to none leaves them unbound"},
		{"on the second host only", plan("a", "a", "b", "b"), "auto", 4, map[string]int{"b": 2},
			"binding each of the 2 ranks of host b to a core of its own (one rank per core); --bind-to none leaves them unbound"},
	} {
		policy, _ := parseBindPolicy(tc.policy)
		cores := func(h string) int { return tc.cores[h] }
		if got := autoBindNotice(tc.plan, policy, here, flatCPUs(tc.cpus), cores); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
}
