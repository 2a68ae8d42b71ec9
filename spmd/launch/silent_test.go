package launch

import (
	"bufio"
	"bytes"
	"context"
	"io"
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

	mu       sync.Mutex // protects following
	pings    []string
	pingedAt map[string]time.Time // the last ping of each host
	given    []string
}

var _ hostAgents = (*fakeAgents)(nil)

func (a *fakeAgents) ping(hosts []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pings = append(a.pings, hosts...)
	if a.pingedAt == nil {
		a.pingedAt = map[string]time.Time{}
	}
	for _, h := range hosts {
		a.pingedAt[h] = time.Now()
	}
}

func (a *fakeAgents) unheard(hosts []string, wait time.Duration) (unheard, late []string) {
	for _, h := range a.silent(hosts) {
		unheard = append(unheard, h)
		a.mu.Lock()
		if time.Since(a.pingedAt[h]) >= wait {
			late = append(late, h)
		}
		a.mu.Unlock()
	}
	return unheard, late
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

// answerAsAgents acts as the agents of c's hosts: the frames the cluster
// sends a host pass, through the outbox of a link, to a goroutine of that
// host, as they would reach its agent; the frames that answer returns for
// each come back to the cluster as its agent's, in order. Each started
// rank is reported started, as pid 1000+rank, and on started.
func answerAsAgents(t *testing.T, c *cluster, started chan<- int, answer func(f frame) []frame) {
	t.Helper()
	c.sp.mu.Lock()
	defer c.sp.mu.Unlock()
	if c.sp.route == nil {
		c.sp.route = map[int]*link{}
	}
	for i, h := range c.hosts {
		l := &link{t: h.t, done: make(chan struct{})}
		l.out.init()
		r, w := io.Pipe()
		go l.out.drain(w)
		done := make(chan struct{})
		go func() {
			defer close(done)
			down := bufio.NewReader(r)
			for {
				f, err := readFrame(down)
				if err != nil {
					return
				}
				if f.Type == frameStart {
					c.frame(u32Frame(frameStarted, f.Host, f.Rank, 1000+f.Rank))
					started <- f.Rank
					continue
				}
				for _, up := range answer(f) {
					c.frame(up)
				}
			}
		}()
		t.Cleanup(func() { l.out.close(); <-done })
		c.sp.route[i] = l
	}
}

// runCluster runs a job of one rank on each of n hosts h1..hn through a
// cluster whose agents answer as answer says (answerAsAgents), with
// killAnswer cut to 10 ms and pingWait as given (0: gorun's); drive acts
// once every rank started. It returns the job's status and gorun's
// stderr.
func runCluster(t *testing.T, n int, pingWait time.Duration, answer func(f frame) []frame, drive func(c *cluster)) (int, string) {
	t.Helper()
	var stdout, stderr syncWriter
	out := newOutput(&stdout, &stderr)
	c := newTestCluster(n, n, out)
	started := make(chan int, n)
	answerAsAgents(t, c, started, answer)
	cfg := DefaultConfig()
	cfg.KillGrace = Duration(10 * time.Millisecond)
	plan := &jobPlan{Apps: []App{{NP: n, Program: "/bin/true"}}}
	for _, h := range targetsN(n) {
		plan.Hosts = append(plan.Hosts, h.Name)
		plan.Ranks = append(plan.Ranks, rankPlan{Rank: h.Index - 1, Host: h.Name, NodeRank: h.Index - 1})
	}
	l := &Launcher{Stdout: &stdout, Stderr: &stderr, killAnswer: 10 * time.Millisecond, pingWait: pingWait}
	j := &job{l: l, cfg: &cfg, plan: plan, out: out, logf: out.Verbosef, starter: c}
	done := make(chan int, 1)
	go func() { done <- j.run(context.Background(), nil) }()
	for range n {
		<-started
	}
	drive(c)
	select {
	case code := <-done:
		return code, stderr.String()
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatalf("the job did not end; stderr:\n%s", stderr.String())
		return 0, ""
	}
}

// endsOnSignal answers a signal frame as an agent whose rank ends by it.
func endsOnSignal(f frame) []frame {
	if f.Type != frameSignal {
		return nil
	}
	sig, _ := f.u32()
	return []frame{jsonFrame(frameExited, f.Host, f.Rank, exitMsg{Signal: sig})}
}

// TestHeldFailureHearsBusyHost: a rank fails after losing a peer on a
// host whose agent's pong is held up behind its ranks' output (a rank
// that prints a lot; 1.8 s measured through ssh on the loaded 2-core
// VM), but whose output keeps coming after the ping: its agent is there,
// and the rank that failed is named, with its status. It named the
// healthy host lost, with 255, once pingWait passed without the pong.
// pingWait is gorun's: it bounds the answer's way through the test's
// goroutines here, as through ssh there.
func TestHeldFailureHearsBusyHost(t *testing.T) {
	code, errOut := runCluster(t, 2, 0, func(f frame) []frame {
		if f.Type == framePing { // the pong is still behind the output
			return []frame{{Type: frameOutput, Host: f.Host, Rank: 1, Payload: []byte("\x01busy\n")}}
		}
		return endsOnSignal(f)
	}, func(c *cluster) {
		c.frame(jsonFrame(frameExited, 1, 0, exitMsg{Code: 1, LostPeers: []int{1}}))
	})
	want := "gorun: rank 0 (pid 1000 on h1) exited with status 1; stopping the other ranks\n"
	if code != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "gorun: host h2") {
		t.Errorf("status %d, want 1 and only %q:\n%s", code, want, errOut)
	}
}

// testClock is a clock that moves only when told to.
type testClock struct {
	mu sync.Mutex // protects at
	at time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

// set moves the clock to d after its start.
func (c *testClock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = time.Unix(1e9, 0).Add(d)
}

// gate is a rank's stdout that takes nothing until opened, as gorun's
// own stdout when nobody reads it; entered says a write is waiting.
type gate struct{ entered, open chan struct{} }

func (g *gate) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.open
	return len(p), nil
}

func (g *gate) Close() error { return nil }

// TestClusterUnheard: a pinged host is unheard until its agent sends
// anything, its pong or another frame, and late once it has sent nothing
// for the wait while its link was read: not while the frame before was
// still being handed on to a stdout that did not take it, which held up
// the agent's pong and named a healthy host lost. h2 and h3 share a link.
func TestClusterUnheard(t *testing.T) {
	var clock testClock
	clock.set(0)
	c := newTestCluster(3, 2, newOutput(io.Discard, io.Discard)) // h1; h2, which starts h3
	c.now = clock.now
	g := &gate{entered: make(chan struct{}), open: make(chan struct{})}
	for r, h := range []string{"h1", "h2", "h3"} {
		var stdout io.WriteCloser = nopCloser{&bytes.Buffer{}}
		if h == "h3" {
			stdout = g
		}
		if _, err := c.Start(&spec{Rank: rankPlan{Rank: r, Host: h}, Stdout: stdout, Stderr: nopCloser{&bytes.Buffer{}}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, wantUnheard, wantLate []string) {
		t.Helper()
		unheard, late := c.unheard([]string{"h1", "h2", "h3"}, 3*time.Second)
		if !slices.Equal(unheard, wantUnheard) || !slices.Equal(late, wantLate) {
			t.Errorf("%s: unheard %v, late %v; want %v, %v", when, unheard, late, wantUnheard, wantLate)
		}
	}
	output := func(host, rank int) frame {
		return frame{Type: frameOutput, Host: host, Rank: rank, Payload: []byte("\x01out\n")}
	}
	check("before any ping", nil, nil)
	c.ping([]string{"h1", "h2"})
	c.frame(output(1, 0)) // h1's agent is there
	check("pinged", []string{"h2"}, nil)

	clock.set(time.Second)
	handed := make(chan struct{})
	go func() { c.frame(output(3, 2)); close(handed) }() // h3's, up the link h2's comes by
	<-g.entered
	clock.set(10 * time.Second)
	check("while the link's frame was handed on", []string{"h2"}, nil)
	close(g.open)
	<-handed
	clock.set(3*time.Second + 9*time.Second - time.Millisecond)
	check("read for just under the wait", []string{"h2"}, nil)
	clock.set(3*time.Second + 9*time.Second)
	check("read for the wait", []string{"h2"}, []string{"h2"})

	c.frame(u32Frame(framePong, 2, 0, 1))
	check("h2 answered", nil, nil)
	c.ping([]string{"h2"})
	c.frame(output(2, 1))
	check("h2's output after its second ping", nil, nil)
}

// TestHeldFailureNamesUnheardHost: where the lost peer's agent sends
// nothing at all after the ping (frozen, or cut off), its host is given
// up and named, with 255, as before.
func TestHeldFailureNamesUnheardHost(t *testing.T) {
	code, errOut := runCluster(t, 2, 10*time.Millisecond, func(f frame) []frame {
		if f.Host == 2 {
			return nil
		}
		return endsOnSignal(f)
	}, func(c *cluster) {
		c.frame(jsonFrame(frameExited, 1, 0, exitMsg{Code: 1, LostPeers: []int{1}}))
	})
	want := "gorun: host h2: no answer from its agent within 10ms after rank 0 (pid 1000 on h1) lost rank 1 there and exited with status 1; giving it up and stopping the job\n"
	if code != 255 || !strings.Contains(errOut, want) || strings.Contains(errOut, "gorun: rank 0") {
		t.Errorf("status %d, want 255 and only %q:\n%s", code, want, errOut)
	}
}
