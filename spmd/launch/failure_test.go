package launch

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runSignalled runs a job of one fake rank on each of hosts h1..hn with
// holdSignal set to hold; drive acts on the ranks once all started, and
// waitLog waits for a line of gorun's stderr (its --verbose lines too). It
// returns the job's status, whether it failed, and its stderr.
func runSignalled(t *testing.T, n int, hold time.Duration, sigs chan os.Signal,
	drive func(st *fakeStarter, waitLog func(string))) (int, bool, string) {
	t.Helper()
	st := &fakeStarter{start: make(chan int, n)}
	var stdout, stderr syncWriter
	cfg := DefaultConfig()
	cfg.KillGrace = Duration(time.Minute)
	plan := &jobPlan{Apps: []App{{NP: n, Program: "/bin/true"}}}
	for r := range n {
		h := fmt.Sprintf("h%d", r+1)
		plan.Hosts = append(plan.Hosts, h)
		plan.Ranks = append(plan.Ranks, rankPlan{Rank: r, Host: h, NodeRank: r})
	}
	out := newOutput(&stdout, &stderr)
	l := &Launcher{Stdout: &stdout, Stderr: &stderr, Signals: sigs, holdSignal: hold}
	j := &job{l: l, cfg: &cfg, plan: plan, out: out, logf: out.Verbosef, starter: st}
	done := make(chan int, 1)
	go func() { done <- j.run(context.Background(), nil) }()
	for range n {
		<-st.start
	}
	guard := time.After(time.Minute) // against a hang, not a timing
	drive(st, func(line string) {
		for !strings.Contains(stderr.String(), line) {
			select {
			case <-guard:
				t.Fatalf("no line %q; stderr:\n%s", line, stderr.String())
			case <-time.After(time.Millisecond):
			}
		}
	})
	select {
	case code := <-done:
		return code, j.failed, stderr.String()
	case <-guard:
		t.Fatalf("the job did not end; stderr:\n%s", stderr.String())
		return 0, false, ""
	}
}

var sigterm = status{Signal: syscall.SIGTERM}

// TestJobSignalled: ranks killed by SIGTERM that gorun did not send, as
// when Slurm's scancel signals every step of a job (gorun's and its
// agents'), and gorun gets its own after the ranks' were reaped: the job
// was signalled, and no rank is named as its failure. It named the first
// rank reaped, in 3 scancels of 5 on the Slurm rig.
func TestJobSignalled(t *testing.T) {
	const already = "it was sent to the whole job (as Slurm's scancel and time limit do), not by gorun\n"
	for _, tc := range []struct {
		name string
		n    int
		// drive ends ranks; the rest get gorun's signal, if it comes
		drive   func(st *fakeStarter, waitLog func(string))
		signal  bool   // gorun gets SIGTERM after drive
		want    string // in gorun's stderr
		notWant string
		code    int
		failed  bool
	}{
		{"gorun's own after one rank's", 3, func(st *fakeStarter, waitLog func(string)) {
			st.proc(1).exit(sigterm)
			waitLog("rank 1 (pid 1001 on h2) was killed by signal 15")
		}, true, "gorun: terminated: stopping the 2 running ranks (send it again to kill them); rank 1 had already been killed by it: " + already,
			"gorun: rank 1 (pid 1001 on h2)", 143, false},
		// The others lost rank 1 and exited 1 before their own SIGTERM,
		// and the job's ranks had ended when gorun got its own.
		{"gorun's own after every rank ended", 3, func(st *fakeStarter, waitLog func(string)) {
			st.proc(1).exit(sigterm)
			waitLog("rank 1 (pid 1001 on h2) was killed by signal 15")
			st.proc(0).exit(status{Code: 1, LostPeers: []int{1}})
			st.proc(2).exit(status{Code: 1, LostPeers: []int{1}})
			waitLog("rank 0 (pid 1000 on h1) exited with status 1")
			waitLog("rank 2 (pid 1002 on h3) exited with status 1")
		}, true, "gorun: terminated: rank 1 had already been killed by it: " + already,
			"gorun: rank 1 (pid 1001 on h2)", 143, false},
		// scancel --signal TERM: every step but gorun's (the batch
		// script's) is signalled.
		{"every rank, not gorun", 3, func(st *fakeStarter, waitLog func(string)) {
			for r := range 3 {
				st.proc(r).exit(sigterm)
			}
		}, false, "gorun: every rank (ranks 0, 1, 2) was killed by signal 15 (terminated), which gorun did not send: " + already,
			"stopping", 143, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sigs := make(chan os.Signal, 1)
			code, failed, errOut := runSignalled(t, tc.n, time.Minute, sigs, func(st *fakeStarter, waitLog func(string)) {
				tc.drive(st, waitLog)
				if tc.signal {
					sigs <- syscall.SIGTERM
				}
			})
			if code != tc.code || failed != tc.failed || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, tc.notWant) {
				t.Errorf("status %d, failed %v; want %d, %v, a line %q and none with %q; stderr:\n%s", code, failed, tc.code, tc.failed, tc.want, tc.notWant, errOut)
			}
		})
	}
}

// TestRankSignalledAlone: a rank killed by SIGTERM that neither gorun nor
// the others got is named, once its hold is over, as the job's failure.
func TestRankSignalledAlone(t *testing.T) {
	var rank0 *fakeProc
	code, failed, errOut := runSignalled(t, 2, 10*time.Millisecond, nil, func(st *fakeStarter, _ func(string)) {
		rank0 = st.proc(0)
		st.proc(1).exit(sigterm)
	})
	want := "gorun: rank 1 (pid 1001 on h2) was killed by signal 15 (terminated); stopping the other ranks\n"
	if code != 143 || !failed || !strings.Contains(errOut, want) {
		t.Errorf("status %d, failed %v; want 143, true and %q; stderr:\n%s", code, failed, want, errOut)
	}
	if fmt.Sprint(rank0.signals) != fmt.Sprint([]syscall.Signal{syscall.SIGTERM}) {
		t.Errorf("rank 0 got %v, want SIGTERM", rank0.signals)
	}
}
