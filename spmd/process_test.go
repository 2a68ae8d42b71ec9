package spmd_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// The process tests run real jobs: the built gorun starting the built rank
// program of testdata/ranks.
var gorunBin, ranksBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "spmd-process-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gorunBin, ranksBin = filepath.Join(dir, "gorun"), filepath.Join(dir, "ranks")
	for bin, pkg := range map[string]string{gorunBin: "../cmd/gorun", ranksBin: "./testdata/ranks"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func gorun(t *testing.T, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(gorunBin, args...)
	cmd.WaitDelay = timeout
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("gorun %v did not finish within %v:\n%s", args, timeout, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gorun %v: %v", args, err)
	}
	return string(out), code
}

func TestProcessHello(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			out, code := gorun(t, time.Minute, "-np", fmt.Sprint(n), ranksBin, "hello")
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			var got []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "rank ") {
					got = append(got, l)
				}
			}
			sort.Strings(got)
			var want []string
			for r := 0; r < n; r++ {
				want = append(want, fmt.Sprintf("rank %d of %d", r, n))
			}
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// Ranks that reach the others of their host over TCP run with their share
// of the cores as Go processors, unless GOMAXPROCS is set; ranks that share
// memory keep all of them. gorun itself gives every rank that share unless
// the user chose a GOMAXPROCS: -x GOMAXPROCS, unset, chooses none, and so
// leaves the rank's own rule to be seen.
func TestProcessShareCores(t *testing.T) {
	const np = 4
	share := max(1, runtime.NumCPU()/np)
	// gorun's rule (spmd/launch/procs.go): at least 2, and nothing set
	// where that is every CPU.
	gorunShare := max(2, runtime.NumCPU()/np)
	if gorunShare >= runtime.NumCPU() {
		gorunShare = runtime.NumCPU()
	}
	own := []string{"-x", "GOMAXPROCS"}
	for _, c := range []struct {
		name, transport, procs string
		x                      []string
		want                   int
	}{
		{"tcp", "tcp", "", own, share},
		{"tcp with GOMAXPROCS", "tcp", "3", own, 3},
		{"shm", "shm", "", own, runtime.NumCPU()},
		{"shm, gorun's share", "shm", "", nil, gorunShare},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GORUN_TRANSPORT", c.transport)
			t.Setenv("GOMAXPROCS", c.procs) // and restores it after
			if c.procs == "" {
				os.Unsetenv("GOMAXPROCS")
			}
			out, code := gorun(t, time.Minute, append(c.x, "-np", fmt.Sprint(np), ranksBin, "procs")...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			got := regexp.MustCompile(`rank \d+ GOMAXPROCS=(\d+)`).FindAllStringSubmatch(out, -1)
			if len(got) != np {
				t.Fatalf("%d ranks reported GOMAXPROCS, want %d:\n%s", len(got), np, out)
			}
			for _, m := range got {
				if m[1] != fmt.Sprint(c.want) {
					t.Errorf("%s: want GOMAXPROCS=%d on %d cores", m[0], c.want, runtime.NumCPU())
				}
			}
		})
	}
}

// A rank whose job makes no Shared collective does not register for the
// expedited membarrier at Init: the registration waits for an RCU grace
// period, uninterruptibly, and held the exit of a short job's every rank
// for 4-15 ms. (Shares starts it, before a job's first collective.)
func TestProcessNoMembarrierAtInit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("membarrier and /proc/self/task/*/syscall are Linux's")
	}
	out, code := gorun(t, time.Minute, "-np", "4", ranksBin, "membarrier")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	got := regexp.MustCompile(`rank \d+: threads in membarrier after Init: (\d+)`).FindAllStringSubmatch(out, -1)
	if len(got) != 4 {
		t.Fatalf("%d ranks reported, want 4:\n%s", len(got), out)
	}
	for _, m := range got {
		if m[1] != "0" {
			t.Errorf("%s, want 0", m[0])
		}
	}
}

// A rank that dies turns the receive waiting on it into ErrPeerLost naming
// it, within 2 seconds, across real processes; gorun exits with its status.
func TestProcessPeerLost(t *testing.T) {
	out, code := gorun(t, time.Minute, "-np", "3", "--kill-grace", "10s", ranksBin, "crash")
	if code != 7 {
		t.Errorf("gorun exited %d, want the dead rank's 7:\n%s", code, out)
	}
	m := regexp.MustCompile(`lost=(\w+) rank=(-?\d+) after=(\S+):`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rank 0 did not report its receive:\n%s", out)
	}
	if m[1] != "true" || m[2] != "1" {
		t.Fatalf("rank 0's receive: errors.Is ErrPeerLost=%s, rank named %s; want true, 1:\n%s", m[1], m[2], out)
	}
	if d, err := time.ParseDuration(m[3]); err != nil || d > 2*time.Second {
		t.Fatalf("loss noticed after %s, want within 2s:\n%s", m[3], out)
	}
}

// A rank that never arrives stops the job when the first of the others
// would give up on it: gorun says so once, naming it, before the ranks
// that waited print their own failures (they wait 2 s more for this).
func TestProcessLateRank(t *testing.T) {
	out, code := gorun(t, time.Minute, "-np", "3", "-x", "GORUN_INIT_TIMEOUT=2s", "--kill-grace", "1s", ranksBin, "late")
	if code != 1 {
		t.Fatalf("gorun exited %d though rank 2 never arrived, want 1:\n%s", code, out)
	}
	if !regexp.MustCompile(`gorun: rank 2 of 3 never reached spmd.Init`).MatchString(out) {
		t.Fatalf("gorun did not name rank 2:\n%s", out)
	}
	if fails := regexp.MustCompile(`init failed: `).FindAllString(out, -1); len(fails) > 0 {
		t.Fatalf("%d ranks printed their own Init failure besides gorun's line:\n%s", len(fails), out)
	}
}

// A rank killed while streaming over shared memory: the receiver gets
// ErrPeerLost, and once gorun returns no file of the job is left in
// /dev/shm, not even one the dead rank left behind.
func TestProcessSHMCrash(t *testing.T) {
	noJobFiles(t, runKilled(t, "-np", "3", "--kill-grace", "5s", ranksBin, "shmcrash"))
}

// noJobFiles checks that no file is left in /dev/shm of the job whose id
// a rank printed in out.
func noJobFiles(t *testing.T, out string) {
	t.Helper()
	m := regexp.MustCompile(`job (\w+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no job id printed:\n%s", out)
	}
	left, _ := filepath.Glob("/dev/shm/gorun-" + m[1] + "-*")
	if len(left) > 0 {
		t.Errorf("files of the job left in /dev/shm: %v", left)
	}
}

// A rank killed in the middle of all-reduces that run through shared
// memory, without messages: the others' calls fail with ErrPeerLost instead
// of waiting for its part forever, and no file of the job is left.
func TestProcessSharedCrash(t *testing.T) {
	out := runKilled(t, "-np", "3", "--kill-grace", "5s", ranksBin, "sharedcrash")
	noJobFiles(t, out)
	if !strings.Contains(out, "allreduce (shared)") {
		t.Errorf("the all-reduce that failed did not run the shared algorithm:\n%s", out)
	}
}

// A rank killed while its receiver keeps a large message of it as an offer
// (in the dead rank's memory): the receive posted afterwards fails with
// ErrPeerLost.
func TestProcessSHMOfferCrash(t *testing.T) {
	runKilled(t, "-np", "2", "--kill-grace", "5s", ranksBin, "offercrash")
}

// runKilled runs a job whose rank 1 SIGKILLs itself and whose rank 0
// prints what its receive returned, and checks both; it returns gorun's
// output.
func runKilled(t *testing.T, args ...string) string {
	t.Helper()
	out, code := gorun(t, time.Minute, args...)
	if code != 137 {
		t.Errorf("gorun exited %d, want 137 (rank 1 killed):\n%s", code, out)
	}
	if !strings.Contains(out, "lost=true") {
		t.Errorf("rank 0's receive did not fail with ErrPeerLost:\n%s", out)
	}
	return out
}

// A second Init in a launched process fails with an error that says so,
// where it failed reading the secret the first had taken; the first
// World still works.
func TestProcessInitTwice(t *testing.T) {
	out, code := gorun(t, time.Minute, "-np", "2", ranksBin, "twice")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for r := range 2 {
		want := fmt.Sprintf("second init: spmd.Init: rank %d: this process has already joined its job", r)
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// A rank that fails on its own and closes its world, then takes a moment
// to exit, is the rank gorun names, though the ranks that lost it exit
// first: they report the loss (GORUN_STATUS_FD), and gorun follows it.
// It named the first rank reaped, which had only lost rank 0.
func TestProcessNamesTheFirstFailure(t *testing.T) {
	for range 3 {
		out, code := gorun(t, time.Minute, "-np", "3", ranksBin, "errclose")
		if code != 1 || !regexp.MustCompile(`gorun: rank 0 \(pid \d+ on [^)]*\) exited with status 1(; stopping the other ranks)?\n`).MatchString(out) {
			t.Fatalf("exit %d, want 1 and rank 0 named:\n%s", code, out)
		}
	}
}
