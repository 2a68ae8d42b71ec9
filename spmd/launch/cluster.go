package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// errHost marks a host whose agent could not be reached or started.
var errHost = errors.New("host unreachable")

// cluster is the launcher's side of the agents: it starts them through a
// spawn tree, sends each its setup, and starts ranks on them as a starter.
// Frames arrive on the links' reader goroutines; the mutex guards the
// hosts' state.
type cluster struct {
	setup func(t target) setupMsg // the setup of host t
	out   *output
	logf  func(format string, args ...any)
	sp    *spawner
	// wdirSet: the ranks' directory is the user's --wdir, which must be
	// on every host; else the launcher's, which a host may lack.
	wdirSet bool
	// preloaded names, by path here, the programs that sp.preload copies
	// to each host's preload directory.
	preloaded map[string]string

	// now is the cluster's clock for telling a silent agent (silent.go):
	// time.Now, or a test's.
	now func() time.Time

	mu      sync.Mutex // protects following
	hosts   map[int]*remoteHost
	byName  map[string]*remoteHost
	sub     map[int][]target // host -> the hosts below it
	changed chan struct{}    // closed and replaced when a host becomes ready or lost
	// links holds, per host, the reading of the link its frames come up
	// (shared by the hosts of a subtree of the spawn tree).
	links map[int]*reading
}

// remoteHost is one host with an agent.
type remoteHost struct {
	t     target
	hello helloMsg
	ready bool
	said  readyMsg // what its agent said when ready (or refused)
	lost  string   // why its agent is gone; "" while it is there
	procs map[int]*remoteProc
	pings int // the last ping sent to its agent (cluster.ping)
	pong  int // the last ping its agent answered
	// heard is the last ping sent before a frame of its agent's was
	// read: the agent was there after it, whether or not it answered.
	heard int
	// pingAt is when the last ping was sent, and deafAt how long its
	// link had been deaf (reading.deaf) by then.
	pingAt time.Time
	deafAt time.Duration
}

// newCluster prepares the agents of targets (host indices from 1).
func newCluster(targets []target, remote remote, radix int, setup func(target) setupMsg, out *output,
	logf func(string, ...any)) *cluster {
	c := &cluster{
		setup: setup, out: out, logf: logf, now: time.Now,
		hosts: map[int]*remoteHost{}, byName: map[string]*remoteHost{},
		sub: map[int][]target{}, changed: make(chan struct{}), links: map[int]*reading{},
	}
	for _, t := range targets {
		h := &remoteHost{t: t, procs: map[int]*remoteProc{}}
		c.hosts[t.Index] = h
		c.byName[t.Name] = h
	}
	for _, g := range splitTree(targets, radix) { // as spawner.start links them
		r := &reading{}
		for _, t := range g {
			c.links[t.Index] = r
		}
	}
	subtreeOf(targets, radix, "", c.sub, map[int]string{})
	c.sp = &spawner{remote: remote, radix: radix, logf: logf, up: c.frame, lost: c.lose}
	return c
}

// connect starts the agents and waits until each has answered its setup.
// A host that cannot be reached is an error naming it (errHost); so is one
// that has not answered within wait (0: no limit), which --connect-timeout
// per set.
func (c *cluster) connect(ctx context.Context, targets []target, wait, per time.Duration) error {
	t0 := time.Now()
	c.sp.start(targets)
	var deadline <-chan time.Time // nil: no limit
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		deadline = timer.C
	}
	for {
		c.mu.Lock()
		var pending []string
		var failed, refused *remoteHost
		for _, t := range targets {
			h := c.hosts[t.Index]
			switch {
			case h.said.Refused != "" && refused == nil:
				refused = h
			case h.lost != "" && failed == nil:
				failed = h
			case !h.ready:
				pending = append(pending, t.Name)
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if refused != nil {
			return errorf(ErrUsage, "host %s: %s: every host of the job needs an address that it matches", refused.t.Name, refused.said.Refused)
		}
		if failed != nil {
			return &kindError{err: fmt.Errorf("host %s: cannot start its agent: %s", failed.t.Name, failed.lost), kind: errHost}
		}
		if len(pending) == 0 {
			c.logf("agents on %d %s ready after %v", len(targets), plural(len(targets), "host"), time.Since(t0).Round(time.Millisecond))
			return nil
		}
		select {
		case <-changed:
		case <-deadline:
			n := len(pending)
			return &kindError{err: fmt.Errorf("%s %s: no answer from %s after %v (--connect-timeout %v); %s up? try %s",
				plural(n, "host"), strings.Join(pending, ", "), pronoun(n, "its agent", "their agents"), wait, per,
				pronoun(n, "is it", "are they"), c.sp.remote.try(c.byName[pending[0]].t)), kind: errHost}
		case <-ctx.Done():
			return fmt.Errorf("interrupted while starting the agents: %w", ctx.Err())
		}
	}
}

// notifyLocked wakes connect. c.mu must be held.
func (c *cluster) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// frame handles a frame from an agent, on the reader goroutine of the
// link it came up.
func (c *cluster) frame(f frame) {
	c.mu.Lock()
	h := c.hosts[f.Host]
	if h == nil {
		c.mu.Unlock()
		c.out.Logf("a frame of type %d from unknown host %d", f.Type, f.Host)
		return
	}
	c.readLocked(h)
	defer c.handled(f.Host)
	var p *remoteProc
	if f.Type >= frameStarted && f.Type <= frameExited || f.Type == frameStdinAck {
		p = h.procs[f.Rank]
	}
	c.mu.Unlock()
	switch f.Type {
	case frameHello:
		c.hello(h, f)
	case frameReady:
		var m readyMsg
		f.decode(&m)
		if m.Refused == "" {
			c.logf("host %s: agent ready, ranks listen on %s", h.t.Name, m.BindAddr)
		}
		c.mu.Lock()
		h.ready, h.said = true, m
		c.notifyLocked()
		c.mu.Unlock()
	case frameLog:
		c.out.Logf("host %s: %s", h.t.Name, f.Payload)
	case frameLost:
		c.lose(f.Host, string(f.Payload))
	case framePong:
		c.pong(h, f)
	case frameStarted, frameOutput, frameExited, frameStdinAck:
		if p != nil {
			p.frame(f)
		}
	}
}

func (c *cluster) hello(h *remoteHost, f frame) {
	var m helloMsg
	if err := f.decode(&m); err != nil {
		c.out.Logf("host %s: %v", h.t.Name, err)
		return
	}
	via := "the launcher"
	if m.Via != "" {
		via = "agent " + m.Via
	}
	c.logf("host %s: agent pid %d on %s, started by %s, ssh from %s", h.t.Name, m.Pid, m.Hostname, via, sshClientAddr(m.SSH))
	if v := Version(); m.Version != v {
		// The same protocol (the preamble said so), another build.
		c.logf("host %s: its gorun is %s, this one %s", h.t.Name, m.Version, v)
	}
	c.mu.Lock()
	h.hello = m
	c.mu.Unlock()
	c.send(jsonFrame(frameSetup, h.t.Index, 0, c.setup(h.t)))
}

// send routes a frame down to its host's agent.
func (c *cluster) send(f frame) {
	if !c.sp.send(f) {
		c.out.Logf("no route to host %d", f.Host)
	}
}

// lose marks host and the hosts below it in the spawn tree lost, why
// saying how its agent's connection ended. The ranks running there all end
// with one status, which names host and the hosts lost with it: whichever
// of them the supervisor hears of first, the job's line names the host
// whose connection dropped, not a host below it.
func (c *cluster) lose(host int, why string) {
	c.mu.Lock()
	h := c.hosts[host]
	if h == nil || h.lost != "" {
		c.mu.Unlock()
		return
	}
	st, ended, _ := c.markLocked(h, why, "connection to its agent lost ("+why+")")
	c.mu.Unlock()
	for _, p := range ended {
		p.end(st)
	}
}

// markLocked marks h lost, why, and the hosts below it in the spawn tree
// not lost yet with it, and returns the status their running ranks end
// with (say, and the hosts lost with h), those ranks, and the hosts below
// that it marked. c.mu must be held.
func (c *cluster) markLocked(h *remoteHost, why, say string) (status, []*remoteProc, []string) {
	var ended []*remoteProc
	mark := func(h *remoteHost, why string) {
		h.lost = why
		for _, p := range h.procs {
			ended = append(ended, p)
		}
	}
	mark(h, why)
	var with []string
	for _, t := range c.sub[h.t.Index] {
		if b := c.hosts[t.Index]; b.lost == "" {
			mark(b, "it is reached through the agent on "+h.t.Name+", which was lost: "+why)
			with = append(with, t.Name)
		}
	}
	c.notifyLocked()
	if len(with) == 1 {
		say += "; host " + with[0] + ", reached through its agent, is lost with it"
	} else if len(with) > 1 {
		say += "; hosts " + strings.Join(with, ", ") + ", reached through its agent, are lost with it"
	}
	return status{Lost: say, LostHost: h.t.Name}, ended, with
}

// Start starts the rank of spec on its host's agent.
func (c *cluster) Start(spec *spec) (proc, error) {
	c.mu.Lock()
	h := c.byName[spec.Rank.Host]
	if h == nil {
		c.mu.Unlock()
		return local{}.Start(spec)
	}
	if h.lost != "" {
		c.mu.Unlock()
		return nil, fmt.Errorf("rank %d: host %s: %s", spec.Rank.Rank, h.t.Name, h.lost)
	}
	p := &remoteProc{c: c, host: h, rank: spec.Rank.Rank, stdout: spec.Stdout, stderr: spec.Stderr,
		started: make(chan struct{}), done: make(chan struct{}), credit: make(chan struct{}, 1)}
	h.procs[p.rank] = p
	c.mu.Unlock()
	c.send(jsonFrame(frameStart, h.t.Index, p.rank, startMsg{
		Path: spec.Path, Args: spec.Args, Dir: spec.Dir, DirSet: c.wdirSet, Env: spec.Rank.Env, Stdin: spec.Stdin != nil,
		ShareProcs: spec.Rank.ShareProcs, Preloaded: c.preloaded[spec.Path],
	}))
	// Not waiting for the rank's pid: an agent frozen or cut off would
	// hold the start loop here. A rank its host could not start ends with
	// status.StartErr, which the supervisor treats as a start failure.
	if spec.Stdin != nil {
		go p.forwardStdin(spec.Stdin)
	}
	return p, nil
}

// close ends the agents' input; they exit once their ranks have. It waits
// up to wait, then kills the ssh processes still running.
func (c *cluster) close(wait time.Duration) { c.sp.close(wait) }

// agents returns, per host name, what its agent said when ready: the
// address its ranks listen on, its CPUs.
func (c *cluster) agents() map[string]readyMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]readyMsg{}
	for _, h := range c.hosts {
		m[h.t.Name] = h.said
	}
	return m
}

// remoteProc is a rank started by an agent.
type remoteProc struct {
	c              *cluster
	host           *remoteHost
	rank           int
	stdout, stderr io.WriteCloser // only the host's reader goroutine writes

	started chan struct{} // closed when pid is known, or the rank ended
	done    chan struct{} // closed when status is set

	once sync.Once // ends the proc once

	mu     sync.Mutex // protects following
	pid    int
	status status
	// unacked counts the bytes of stdin sent that the agent has not yet
	// written to the rank's pipe; stdinShut: the rank takes no more.
	unacked   int
	stdinShut bool
	credit    chan struct{} // wakes forwardStdin when an acknowledgement came
}

var _ proc = (*remoteProc)(nil)

// Pid waits until the agent has reported the rank's pid (0 if it never started).
func (p *remoteProc) Pid() int {
	<-p.started
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Signal asks the agent to signal the rank's process group.
func (p *remoteProc) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.c.send(u32Frame(frameSignal, p.host.t.Index, p.rank, int(sig)))
	return nil
}

// Exited reports whether the rank's end came: the agent sends it after the
// rank's output, so a rank whose output still waits to be written here
// counts as running.
func (p *remoteProc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *remoteProc) Wait() status {
	<-p.done
	return p.status
}

// frame handles the rank's frames, on the host's reader goroutine.
func (p *remoteProc) frame(f frame) {
	switch f.Type {
	case frameStarted:
		pid, err := f.u32()
		if err == nil {
			p.mu.Lock()
			p.pid = pid
			p.mu.Unlock()
			closeOnce(p.started)
			p.c.logf("started rank %d (pid %d on %s)", p.rank, pid, p.host.t.Name)
		}
	case frameOutput:
		if len(f.Payload) < 1 {
			return
		}
		select {
		case <-p.done:
			return
		default:
		}
		switch f.Payload[0] {
		case 1:
			p.stdout.Write(f.Payload[1:])
		case 2:
			p.stderr.Write(f.Payload[1:])
		}
	case frameExited:
		var m exitMsg
		f.decode(&m)
		if m.StartErr != "" {
			p.end(status{Code: m.Code, StartErr: "host " + p.host.t.Name + ": " + m.StartErr})
			return
		}
		p.end(status{Code: m.Code, Signal: syscall.Signal(m.Signal), LostPeers: m.LostPeers})
	case frameStdinAck:
		p.mu.Lock()
		if n, err := f.u32(); err == nil {
			p.unacked -= n
		} else {
			p.stdinShut = true // an empty acknowledgement
		}
		p.mu.Unlock()
		select {
		case p.credit <- struct{}{}:
		default:
		}
	}
}

// end sets the rank's status, once.
func (p *remoteProc) end(st status) {
	p.once.Do(func() {
		p.stdout.Close()
		p.stderr.Close()
		p.status = st
		closeOnce(p.started)
		close(p.done)
	})
}

// stdinWindow bounds the bytes of a rank's stdin on their way to its
// agent and not yet written to the rank's pipe: what gorun reads ahead of
// a rank that reads slowly, in memory here and on the agent.
const stdinWindow = 1 << 20

// forwardStdin sends what the rank should read to its agent, at most
// stdinWindow ahead of what the rank has taken, and stops when the rank
// takes no more.
func (p *remoteProc) forwardStdin(f *os.File) {
	defer f.Close()
	go func() { <-p.done; f.Close() }()
	buf := make([]byte, outputChunk)
	for {
		if !p.stdinCredit() {
			return
		}
		n, err := f.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.unacked += n
			p.mu.Unlock()
			p.c.send(frame{Type: frameStdin, Host: p.host.t.Index, Rank: p.rank, Payload: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			p.c.send(frame{Type: frameStdin, Host: p.host.t.Index, Rank: p.rank})
			return
		}
	}
}

// stdinCredit waits until less than stdinWindow is unacknowledged; false:
// the rank takes no more input, or ended.
func (p *remoteProc) stdinCredit() bool {
	for {
		p.mu.Lock()
		shut, room := p.stdinShut, p.unacked < stdinWindow
		p.mu.Unlock()
		switch {
		case shut:
			return false
		case room:
			return true
		}
		select {
		case <-p.credit:
		case <-p.done:
			return false
		}
	}
}

func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
