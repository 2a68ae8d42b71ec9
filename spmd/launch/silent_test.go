package launch

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeAgents is a fakeStarter whose ranks run on hosts reached through
// agents, as the cluster's do: it answers the supervisor's pings (unless
// mute) and gives hosts up by ending their ranks lost.
type fakeAgents struct {
	*fakeStarter
	mute bool // the agents answer no ping

	mu    sync.Mutex // protects following
	pings []string
	given []string
}

var _ hostAgents = (*fakeAgents)(nil)

func (a *fakeAgents) ping(hosts []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pings = append(a.pings, hosts...)
}

func (a *fakeAgents) silent(hosts []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, h := range hosts {
		if a.mute && slices.Contains(a.pings, h) && !slices.Contains(a.given, h) {
			out = append(out, h)
		}
	}
	return out
}

func (a *fakeAgents) giveUp(host, why string) []string {
	a.mu.Lock()
	if slices.Contains(a.given, host) {
		a.mu.Unlock()
		return nil
	}
	a.given = append(a.given, host)
	a.mu.Unlock()
	a.fakeStarter.mu.Lock()
	defer a.fakeStarter.mu.Unlock()
	for _, p := range a.procs {
		if p.host == host {
			p.exit(status{Lost: why, LostHost: host})
		}
	}
	return []string{host}
}

func (a *fakeAgents) hold() {}

func (a *fakeAgents) pinged() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.pings)
}

// runAgents runs a job of one fake rank on each of hosts, through a, with
// killAnswer and pingWait cut to 10 ms; drive acts on the ranks once all
// started. It returns the job's status and gorun's stderr.
func runAgents(t *testing.T, a *fakeAgents, hosts []string, sigs chan os.Signal, drive func(*fakeStarter)) (int, string) {
	t.Helper()
	a.start = make(chan int, len(hosts))
	var stdout, stderr bytes.Buffer
	cfg := DefaultConfig()
	cfg.KillGrace = Duration(10 * time.Millisecond)
	plan := &jobPlan{Apps: []App{{NP: len(hosts), Program: "/bin/true"}}, Hosts: hosts}
	for r, h := range hosts {
		plan.Ranks = append(plan.Ranks, rankPlan{Rank: r, Host: h, NodeRank: r})
	}
	out := newOutput(&stdout, &stderr)
	l := &Launcher{Stdout: &stdout, Stderr: &stderr, Signals: sigs, killAnswer: 10 * time.Millisecond, pingWait: 10 * time.Millisecond}
	j := &job{l: l, cfg: &cfg, plan: plan, out: out, logf: out.Verbosef, starter: a}
	done := make(chan int, 1)
	go func() { done <- j.run(context.Background(), nil) }()
	for range hosts {
		<-a.start
	}
	drive(a.fakeStarter)
	select {
	case code := <-done:
		return code, stderr.String()
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatalf("the job did not end; stderr:\n%s", stderr.String())
		return 0, ""
	}
}

// TestKillGivesUpSilentHost: a host whose agent does not answer (frozen,
// or cut off) gets SIGKILL frames that never arrive; killAnswer after
// them the host is given up, and gorun exits with the status the signal
// decided. It hung.
func TestKillGivesUpSilentHost(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	a := &fakeAgents{fakeStarter: &fakeStarter{stuckOn: "h2"}, mute: true}
	code, errOut := runAgents(t, a, []string{"h1", "h2"}, sigs, func(*fakeStarter) { sigs <- syscall.SIGTERM })
	if code != 143 {
		t.Errorf("status %d, want 143 (SIGTERM)", code)
	}
	want := "gorun: host h2: no answer from its agent 10ms after SIGKILL was sent; giving it up (rank 1 may still run there)\n"
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	if !slices.Contains(a.pinged(), "h2") || !slices.Equal(a.given, []string{"h2"}) {
		t.Errorf("pinged %v, gave up %v; want h2 pinged and given up", a.pinged(), a.given)
	}
	if p := a.proc(1); !slices.Equal(p.signals, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}) {
		t.Errorf("rank 1 got %v, want SIGTERM, SIGKILL", p.signals)
	}
}

// TestKillGivesUpBusyHost: a host whose agent answers but whose ranks
// do not end after SIGKILL (a rank in uninterruptible sleep) is given up
// too, and the line says so.
func TestKillGivesUpBusyHost(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	a := &fakeAgents{fakeStarter: &fakeStarter{stuckOn: "h2"}}
	code, errOut := runAgents(t, a, []string{"h1", "h2"}, sigs, func(*fakeStarter) { sigs <- syscall.SIGINT })
	want := "gorun: host h2: ranks still ran 10ms after SIGKILL was sent, though its agent answered; giving it up\n"
	if code != 130 || !strings.Contains(errOut, want) {
		t.Errorf("status %d, want 130; stderr lacks %q:\n%s", code, want, errOut)
	}
}

// TestHeldFailureNamesSilentHost: a rank that exits 1 after losing a
// peer whose host's agent does not answer is not named; the host is,
// with the lost-host status. It named the healthy rank, with 1.
func TestHeldFailureNamesSilentHost(t *testing.T) {
	a := &fakeAgents{fakeStarter: &fakeStarter{}, mute: true}
	code, errOut := runAgents(t, a, []string{"h1", "h2"}, nil, func(s *fakeStarter) {
		s.proc(0).exit(status{Code: 1, LostPeers: []int{1}})
	})
	if code != 255 {
		t.Errorf("status %d, want 255 (a lost host)", code)
	}
	want := "gorun: host h2: no answer from its agent within 10ms after rank 0 (pid 1000 on h1) lost rank 1 there and exited with status 1; giving it up and stopping the job\n"
	if !strings.Contains(errOut, want) || strings.Contains(errOut, "gorun: rank 0") {
		t.Errorf("want only %q:\n%s", want, errOut)
	}
	if !slices.Equal(a.pinged(), []string{"h2"}) {
		t.Errorf("pinged %v, want h2 only", a.pinged())
	}
}

// TestHeldFailureAgentAnswers: where the lost peer's agent answers, the
// rank that failed is named, as before.
func TestHeldFailureAgentAnswers(t *testing.T) {
	a := &fakeAgents{fakeStarter: &fakeStarter{}}
	code, errOut := runAgents(t, a, []string{"h1", "h2"}, nil, func(s *fakeStarter) {
		s.proc(0).exit(status{Code: 1, LostPeers: []int{1}})
	})
	if code != 1 || !strings.Contains(errOut, "gorun: rank 0 (pid 1000 on h1) exited with status 1; stopping the other ranks\n") {
		t.Errorf("status %d, want 1 naming rank 0:\n%s", code, errOut)
	}
	if !slices.Equal(a.pinged(), []string{"h2"}) || len(a.given) > 0 {
		t.Errorf("pinged %v, gave up %v; want h2 pinged, none given up", a.pinged(), a.given)
	}
}

// TestClusterPingGiveUp: a host is silent from a ping until its agent's
// pong; giving one up ends its ranks and those of the hosts below it, once.
func TestClusterPingGiveUp(t *testing.T) {
	c, procs := testCluster(t, 3, 1)
	if got := c.silent([]string{"h1", "h2"}); len(got) != 0 {
		t.Errorf("silent before any ping: %v", got)
	}
	c.ping([]string{"h2", "h9"}) // h9 is no host of the cluster
	if got := c.silent([]string{"h1", "h2", "h9"}); !slices.Equal(got, []string{"h2"}) {
		t.Errorf("silent after pinging h2: %v", got)
	}
	c.frame(u32Frame(framePong, 2, 0, 1))
	if got := c.silent([]string{"h2"}); len(got) != 0 {
		t.Errorf("silent after h2's pong: %v", got)
	}
	c.ping([]string{"h2"})
	if got := c.giveUp("h2", "no answer"); !slices.Equal(got, []string{"h2", "h3"}) {
		t.Errorf("giving up h2 gave up %v, want h2 and h3, reached through it", got)
	}
	if c.giveUp("h3", "no answer") != nil || c.giveUp("h9", "no answer") != nil {
		t.Error("giveUp gave up h3, lost with h2 already, or h9, not a host")
	}
	want := status{Lost: "no answer; host h3, reached through its agent, is lost with it", LostHost: "h2"}
	for _, p := range procs[1:] {
		if st := p.Wait(); !equalStatus(st, want) {
			t.Errorf("%+v, want %+v", st, want)
		}
	}
	if got := c.silent([]string{"h2"}); len(got) != 0 {
		t.Errorf("a lost host is silent: %v", got)
	}
	select {
	case <-procs[0].(*remoteProc).done:
		t.Error("the rank on h1, above h2, ended")
	default:
	}
}
