package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestGoMaxProcs runs 4 Go ranks on this machine: unless the user chose a
// GOMAXPROCS, each runs with its share of the CPUs, max(2, CPUs/4), and
// gorun says so in one line (on 2 or 3 CPUs that is all of them: gorun
// sets nothing and says nothing); a value the user chose (in gorun's
// environment, with -x, with -x for one program of an MPMD job) is what
// those ranks get, and gorun says nothing of it. Through agents each
// host's share is of the ranks on that host.
func TestGoMaxProcs(t *testing.T) {
	cpus := runtime.NumCPU()
	// shareOf is what a rank of r on this host runs with: its share, or
	// Go's default when the share is every CPU.
	shareOf := func(r int) int {
		if n := max(2, cpus/r); n < cpus {
			return n
		}
		return cpus
	}
	share := shareOf(4)
	prog, rsh := procsAndRsh(t)
	notice := func(procs, ranks int, where string) string {
		if procs == cpus {
			return "" // nothing set, nothing said
		}
		each := fmt.Sprintf("each of %d ranks", ranks)
		if ranks == 1 {
			each = "1 rank"
		}
		return fmt.Sprintf("gorun: GOMAXPROCS=%d for %s on %d CPUs of %s; set GOMAXPROCS to choose another\n", procs, each, cpus, where)
	}
	for _, tc := range []struct {
		name   string
		env    string // GOMAXPROCS in gorun's environment; "" unset
		args   []string
		want   []int // GOMAXPROCS per rank
		notice string
	}{
		// --bind-to none: on a host of 4 cores, auto would bind the 4
		// ranks, and a bound rank's share counts its binding's CPUs.
		{"nobody chose", "", []string{"-np", "4", "--bind-to", "none", prog}, []int{share, share, share, share}, notice(share, 4, "this host")},
		{"in gorun's environment", "2", []string{"-np", "4", "--bind-to", "none", prog}, []int{2, 2, 2, 2}, ""},
		{"with -x", "", []string{"-np", "4", "--bind-to", "none", "-x", "GOMAXPROCS=3", prog}, []int{3, 3, 3, 3}, ""},
		{"with -x for one program", "", []string{"-np", "1", "--bind-to", "none", prog, ":", "-np", "3", "-x", "GOMAXPROCS=2", prog},
			[]int{share, 2, 2, 2}, notice(share, 1, "this host")},
		{"through agents", "", []string{"--launch-agent", rsh, "-H", "127.0.0.2:2,127.0.0.3:1", "--bind-to", "none", prog},
			[]int{shareOf(2), shareOf(2), cpus}, notice(shareOf(2), 2, "host 127.0.0.2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runProcs(t, tc.env, tc.args...)
			if r.code != 0 {
				t.Fatal(r)
			}
			for rank, procs := range tc.want {
				if line := fmt.Sprintf("rank %d GOMAXPROCS=%d\n", rank, procs); !strings.Contains(r.stdout, line) {
					t.Errorf("stdout lacks %q on %d CPUs\n%v", line, cpus, r)
				}
			}
			var said []string // gorun's lines on GOMAXPROCS
			for _, l := range strings.SplitAfter(r.stderr, "\n") {
				if strings.Contains(l, "GOMAXPROCS") {
					said = append(said, l)
				}
			}
			switch {
			case tc.notice == "" && len(said) > 0:
				t.Errorf("gorun spoke of GOMAXPROCS, which the user chose\n%v", r)
			case tc.notice != "" && (len(said) != 1 || said[0] != tc.notice):
				t.Errorf("want the one line %q\n%v", tc.notice, r)
			}
		})
	}
}

// TestNoticesThroughAgents: what gorun says it sets for a host's Go ranks
// (OMP_NUM_THREADS, GOMAXPROCS, the binding that auto chose) and what the
// ranks get are the same whether the host is this machine or another
// behind an agent, which here has this machine's CPUs; through an agent
// gorun left out the lines on GOMAXPROCS and the binding.
func TestNoticesThroughAgents(t *testing.T) {
	prog, rsh := procsAndRsh(t)
	np := strconv.Itoa(runtime.NumCPU()) // auto binds them where the CPUs are cores
	here := runProcs(t, "", "-np", np, prog)
	there := runProcs(t, "", "--launch-agent", rsh, "-H", "127.0.0.2:"+np, "-np", np, prog)
	if here.code != 0 || there.code != 0 {
		t.Fatalf("here:\n%v\nthrough an agent:\n%v", here, there)
	}
	if !strings.Contains(here.stderr, "GOMAXPROCS") && !strings.Contains(here.stderr, "binding") {
		t.Logf("gorun sets neither GOMAXPROCS nor a binding for %s ranks here:\n%v", np, here)
	}
	if want := strings.ReplaceAll(here.stderr, "this host", "host 127.0.0.2"); there.stderr != want {
		t.Errorf("through an agent gorun said\n%s\nwant, as here\n%s", there.stderr, want)
	}
	if strings.Join(lines(there.stdout), "\n") != strings.Join(lines(here.stdout), "\n") {
		t.Errorf("ranks through an agent said\n%s\nwant, as here\n%s", there.stdout, here.stdout)
	}
}

// runProcs runs gorun with args, GOMAXPROCS in its environment set to
// procs ("": unset).
func runProcs(t *testing.T, procs string, args ...string) result {
	t.Helper()
	cmd := gorunCmd(t, args...)
	env := cmd.Env[:0:0]
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, "GOMAXPROCS=") {
			env = append(env, kv)
		}
	}
	if procs != "" {
		env = append(env, "GOMAXPROCS="+procs)
	}
	cmd.Env = env
	return runGorun(t, cmd)
}

// TestTimerSlack runs ranks and reads the timer slack each starts with: by
// default 500 us for Go ranks bound to a CPU of their own, and for every
// other rank (unbound, or not a Go program) the slack gorun itself has;
// --timer-slack 0 leaves it alone, a duration sets it for every rank,
// through agents too. Every case runs with an outer job's
// GORUN_TIMER_SLACK, GORUN_BIND_TO and GORUN_REPORT_BINDINGS in gorun's
// environment, which must change nothing.
func TestTimerSlack(t *testing.T) {
	own, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Skipf("this kernel does not show a timer slack: %v", err)
	}
	inherited := strings.TrimSpace(string(own))
	cpus := runtime.NumCPU()
	np := strconv.Itoa(cpus) // a rank to each CPU
	prog, rsh := procsAndRsh(t)
	shell := []string{"sh", "-c", `echo "rank $GORUN_RANK timerslack=$(cat /proc/self/timerslack_ns)"`}
	for _, tc := range []struct {
		name  string
		bound bool // a rank to each CPU, bound to it
		args  []string
		want  string // each rank's slack
	}{
		{"bound Go ranks", true, []string{"-np", np, "--bind-to", "hwthread", prog}, "500000"},
		{"bound, 0", true, []string{"-np", np, "--bind-to", "hwthread", "--timer-slack", "0", prog}, inherited},
		{"bound, not Go", true, append([]string{"-np", np, "--bind-to", "hwthread"}, shell...), inherited},
		{"unbound", false, []string{"-np", "2", "--bind-to", "none", prog}, inherited},
		{"unbound, chosen", false, []string{"-np", "2", "--bind-to", "none", "--timer-slack", "2ms", prog}, "2000000"},
		{"not Go, chosen", false, append([]string{"-np", "2", "--timer-slack", "1.5ms"}, shell...), "1500000"},
		// What the plan tells the starters does not come from gorun's own
		// environment (a rank of an outer job): unbound, as --bind-to
		// none says, with the slack gorun has.
		{"outer job's variables", false, []string{"-np", "2", "--bind-to", "none", prog}, inherited},
		{"through agents", false, []string{"--launch-agent", rsh, "-H", "127.0.0.2:1,127.0.0.3:1", "--bind-to", "none", "--timer-slack", "3ms", prog}, "3000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := gorunCmd(t, tc.args...)
			cmd.Env = append(cmd.Env, "GORUN_TIMER_SLACK=3ms", "GORUN_BIND_TO=hwthread", "GORUN_REPORT_BINDINGS=1")
			r := runGorun(t, cmd)
			if r.code != 0 {
				t.Fatal(r)
			}
			if strings.Contains(r.stderr, "gorun: rank 0 on") {
				t.Errorf("GORUN_REPORT_BINDINGS came from gorun's environment\n%v", r)
			}
			ranks := 2
			if tc.bound {
				ranks = cpus
			}
			for rank := range ranks {
				if line := fmt.Sprintf("rank %d timerslack=%s\n", rank, tc.want); !strings.Contains(r.stdout, line) {
					t.Errorf("stdout lacks %q\n%v", line, r)
				}
			}
		})
	}
}

// procsAndRsh builds testdata/procs and writes the fake rsh, both in
// temporary directories.
func procsAndRsh(t *testing.T) (prog, rsh string) {
	t.Helper()
	prog = filepath.Join(t.TempDir(), "procs")
	if out, err := exec.Command("go", "build", "-o", prog, "./testdata/procs").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/procs: %v\n%s", err, out)
	}
	rsh = filepath.Join(t.TempDir(), "rsh")
	if err := os.WriteFile(rsh, []byte(fakeRsh), 0o755); err != nil {
		t.Fatal(err)
	}
	return prog, rsh
}

// TestQuiet: -q (or quiet = true in the config file) leaves out the
// notices of a job whose ranks fill the host's cores (OMP_NUM_THREADS,
// GOMAXPROCS, the binding) or oversubscribe it, and keeps a failure's.
func TestQuiet(t *testing.T) {
	prog, _ := procsAndRsh(t)
	over := strconv.Itoa(runtime.NumCPU() + 1)
	loud := gorun(t, "", "-np", over, prog)
	if loud.code != 0 || !strings.Contains(loud.stderr, "OMP_NUM_THREADS") || !strings.Contains(loud.stderr, "oversubscribed") {
		t.Fatalf("without -q, want the notices\n%v", loud)
	}
	conf := filepath.Join(t.TempDir(), "gorun.toml")
	if err := os.WriteFile(conf, []byte("quiet = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-q", "-np", over, prog},
		{"--quiet", "-np", strconv.Itoa(runtime.NumCPU()), prog},
		{"--config", conf, "-np", over, prog},
	} {
		if r := gorun(t, "", args...); r.code != 0 || r.stderr != "" {
			t.Errorf("gorun %v: want status 0 and nothing on stderr\n%v", args, r)
		}
	}
	if r := gorun(t, "", "-q", "-np", "2", "sh", "-c", "exit 3"); r.code != 3 || !strings.Contains(r.stderr, "exited with status 3") {
		t.Errorf("-q kept quiet about a failure\n%v", r)
	}
}
