package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/net/shm"
)

// RunAgent is gorun in agent mode (gorun --agent), started by the launcher
// or by a parent agent over ssh or srun. It talks the agent protocol (see
// frame.go) on in and out: it says hello, takes its setup, starts the
// agents of its subtree and relays their frames, starts its host's ranks
// with the same environment contract as Local, forwards their output,
// exit statuses and the signals sent to them. When in ends (the launcher's
// connection dropped), when nothing has come on in for the setup's
// AgentTimeout (watchdog.go: a link cut off, a hung launcher), or when ctx
// ends (the agent was signalled), it sends
// SIGTERM to its ranks' process groups, SIGKILL after the kill grace, ends
// its children agents, kills what is left in the job's cgroup, removes its
// preload directory, and returns. log gets lines that cannot go up (before
// the connection is set up). guard is as Launcher.Guard: with it, the
// host's ranks are held in a cgroup of their own where the host allows.
func RunAgent(ctx context.Context, in io.Reader, out io.Writer, log io.Writer, guard []string) int {
	a := &agent{out: out, log: log, guard: guard, ranks: map[int]*agentRank{}}
	if err := a.write(append([]byte("\n"+preamble+"\n"), appendFrame(nil, jsonFrame(frameHello, 0, 0, helloMsg{
		Hostname: hostname(), Pid: os.Getpid(), Version: Version(), SSH: os.Getenv("SSH_CONNECTION"),
	}))...)); err != nil {
		fmt.Fprintf(log, "gorun agent: %v\n", err)
		return 1
	}
	frames := make(chan frame)
	readDone := make(chan error, 1)
	w := newWatchdog()
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			f, err := readFrame(r)
			if err != nil {
				readDone <- err
				return
			}
			w.heardFrame(f)
			frames <- f
		}
	}()
	var watch <-chan time.Time // the watchdog's checks, once setup armed it
	for {
		select {
		case f := <-frames:
			a.handle(f)
			if watch == nil && a.setup.AgentTimeout > 0 {
				w.arm(a.setup.AgentTimeout)
				tick := time.NewTicker(w.interval())
				defer tick.Stop()
				watch = tick.C
			}
		case <-watch:
			a.alive()
			if silent := w.check(); silent > 0 {
				parent := "gorun"
				if a.setup.Parent != "" {
					parent = "the agent of host " + a.setup.Parent
				}
				msg := fmt.Sprintf("heard nothing from %s for %v (--agent-timeout %v): cut off, or it hangs; stopping the ranks of host %s",
					parent, silent.Round(time.Second/10), w.limit, a.setup.Name)
				a.logf("%s", msg) // for a launcher that is only slow
				fmt.Fprintf(log, "gorun agent: %s\n", msg)
				a.shutdown()
				return 1
			}
		case err := <-readDone:
			a.shutdown()
			if err != io.EOF {
				// A malformed frame, or a broken pipe: the launcher is
				// gone or not a launcher; stopping is not success.
				fmt.Fprintf(log, "gorun agent: reading from the launcher: %v\n", err)
				return 1
			}
			return 0
		case <-ctx.Done():
			a.shutdown()
			return 0
		}
	}
}

// agent is the state of RunAgent. handle and shutdown run on RunAgent's
// goroutine; write is safe for concurrent use.
type agent struct {
	log   io.Writer
	self  int // host index, known from setup; 0 before
	setup setupMsg
	bind  string
	sp    *spawner
	ranks map[int]*agentRank // by rank
	guard []string           // the cgroup guard's command; nil: no cgroup
	cg    *cgroup            // the job's cgroup on this host; nil: none
	// preload is this host's preload directory (setupMsg.PreloadDir),
	// removed at the end; "" none.
	preload string

	sending atomic.Bool // a keepalive is being sent up (alive)

	wmu sync.Mutex // protects out
	out io.Writer
}

// agentRank is a rank this agent started.
type agentRank struct {
	proc  proc
	stdin *stdinSink // its stdin (feedStdin), or nil
	done  chan struct{}
}

// alive sends a keepalive up, on a goroutine of its own: a parent that
// does not read (its stdout held up) must not hold up the watchdog. One
// not yet written is enough.
func (a *agent) alive() {
	if a.sending.CompareAndSwap(false, true) {
		go func() {
			a.send(frame{Type: frameAlive, Host: a.self})
			a.sending.Store(false)
		}()
	}
}

// write sends bytes up to the launcher; frames from several goroutines do
// not interleave.
func (a *agent) write(b []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_, err := a.out.Write(b)
	return err
}

func (a *agent) send(f frame) { a.write(appendFrame(nil, f)) }

// logf sends a line for gorun's log.
func (a *agent) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if a.self == 0 {
		fmt.Fprintf(a.log, "gorun agent: %s\n", msg)
		return
	}
	a.send(frame{Type: frameLog, Host: a.self, Payload: []byte(msg)})
}

// verbosef logs with --verbose only.
func (a *agent) verbosef(format string, args ...any) {
	if a.setup.Verbose {
		a.logf(format, args...)
	}
}

func (a *agent) handle(f frame) {
	switch {
	case f.Type == frameAlive || f.Type == frameHold:
		return // for this agent's watchdog, which has counted them
	case f.Type == frameSetup && a.self == 0:
		a.doSetup(f)
		return
	}
	if f.Host != a.self {
		if a.sp == nil || !a.sp.send(f) {
			a.logf("no route to host %d for a frame of type %d", f.Host, f.Type)
		}
		return
	}
	switch f.Type {
	case framePing:
		// After the frames before it: a pong also says that the signals
		// sent before the ping were delivered.
		a.send(frame{Type: framePong, Host: a.self, Payload: f.Payload})
	case frameStart:
		a.start(f)
	case frameSignal:
		if r := a.ranks[f.Rank]; r != nil {
			if sig, err := f.u32(); err == nil {
				r.proc.Signal(syscall.Signal(sig))
			}
		}
	case frameStdin:
		if r := a.ranks[f.Rank]; r != nil && r.stdin != nil {
			if len(f.Payload) == 0 {
				r.stdin.end()
			} else {
				r.stdin.push(f.Payload)
			}
		}
	}
}

// doSetup takes the agent's identity and job, picks the address its ranks
// bind, starts the agents below it and answers ready.
func (a *agent) doSetup(f frame) {
	var s setupMsg
	if err := f.decode(&s); err != nil || f.Host == 0 {
		fmt.Fprintf(a.log, "gorun agent: bad setup: %v\n", err)
		return
	}
	a.self, a.setup = f.Host, s
	if isPreloadDir(s.PreloadDir) {
		a.preload = s.PreloadDir
	}
	bind, err := pickAddr(s.Iface, s.Net, s.Seed)
	if err == nil && (s.Iface != "" || s.Net != "") && isLoopback(bind) && !isLoopback(s.Seed) {
		err = loopbackError(s.Iface, s.Net, bind) // ranks elsewhere could not reach them
	}
	switch ip := sshServerAddr(os.Getenv("SSH_CONNECTION")); {
	case err != nil && (s.Iface != "" || s.Net != ""):
		// The user's choice, which ranks on other hosts could not reach
		// on 127.0.0.1: the launcher stops the job at once.
		a.send(jsonFrame(frameReady, a.self, 0, readyMsg{Refused: err.Error()}))
		return
	case err != nil && ip != "":
		bind = ip
	case err != nil:
		a.logf("%v; ranks will listen on 127.0.0.1", err)
		bind = "127.0.0.1"
	}
	a.bind = bind
	if a.guard != nil {
		a.cg = openCgroup(s.JobID, a.guard, a.verbosef)
	}
	if len(s.Subtree) > 0 {
		a.sp = &spawner{
			remote: s.Remote, radix: s.Radix, via: s.Name, logf: a.verbosef, agentTimeout: s.AgentTimeout,
			up: func(f frame) { a.send(f) },
			lost: func(host int, reason string) {
				a.send(frame{Type: frameLost, Host: host, Payload: []byte(reason)})
			},
		}
		if a.preload != "" {
			a.sp.preload = preloadFiles(a.preload)
		}
		a.sp.start(s.Subtree)
	}
	a.send(jsonFrame(frameReady, a.self, 0, readyMsg{BindAddr: bind, CPUs: runtime.NumCPU(), Cores: hostCores()}))
}

// start starts one rank and reports started, or exited with the reason it
// could not be started (exitMsg.StartErr) and 127 or 126, as a shell would.
func (a *agent) start(f frame) {
	var m startMsg
	if err := f.decode(&m); err != nil {
		a.startFailed(f.Rank, 1, fmt.Sprintf("rank %d: %v", f.Rank, err))
		return
	}
	if m.Preloaded != "" && a.preload != "" && filepath.IsLocal(m.Preloaded) {
		m.Path = filepath.Join(a.preload, m.Preloaded)
	}
	if m.Dir != "" {
		if fi, err := os.Stat(m.Dir); m.DirSet && err != nil {
			a.startFailed(f.Rank, 2, fmt.Sprintf("rank %d: --wdir %s: %v on this host; the ranks run in it on every host, so make it there too, or give a directory every host has",
				f.Rank, m.Dir, errors.Unwrap(err)))
			return
		} else if m.DirSet && !fi.IsDir() {
			a.startFailed(f.Rank, 2, fmt.Sprintf("rank %d: --wdir %s: not a directory on this host", f.Rank, m.Dir))
			return
		} else if err != nil || !fi.IsDir() {
			a.verbosef("rank %d: no directory %s here; running in %s", f.Rank, m.Dir, cwd())
			m.Dir = ""
		}
	}
	env := append(inheritedEnv(), m.Env...)
	if !hasVar(m.Env, contract.EnvBindAddr) {
		env = append(env, contract.EnvBindAddr+"="+a.bind)
	}
	spec := &spec{
		Rank: rankPlan{Rank: f.Rank, ShareProcs: m.ShareProcs}, Path: m.Path, Args: m.Args, Dir: m.Dir, Env: env,
		Secret: a.setup.Secret,
		Stdout: &frameWriter{a: a, rank: f.Rank, stream: 1},
		Stderr: &frameWriter{a: a, rank: f.Rank, stream: 2},
		Cgroup: a.cg,
	}
	var stdinW *os.File
	if m.Stdin {
		r, w, err := os.Pipe()
		if err == nil {
			spec.Stdin, stdinW = r, w
		}
	}
	p, err := local{}.Start(spec) // closes spec.Stdin
	if err != nil {
		if stdinW != nil {
			stdinW.Close()
		}
		a.startFailed(f.Rank, startFailure(err), err.Error())
		return
	}
	r := &agentRank{proc: p, done: make(chan struct{})}
	if stdinW != nil {
		r.stdin = a.feedStdin(f.Rank, stdinW)
	}
	a.ranks[f.Rank] = r
	a.send(u32Frame(frameStarted, a.self, f.Rank, p.Pid()))
	go func() {
		st := p.Wait()
		a.send(jsonFrame(frameExited, a.self, f.Rank, exitMsg{Code: st.Code, Signal: int(st.Signal), LostPeers: st.LostPeers}))
		close(r.done)
	}()
}

// startFailed reports that rank could not be started, and why.
func (a *agent) startFailed(rank, code int, why string) {
	a.send(jsonFrame(frameExited, a.self, rank, exitMsg{Code: code, StartErr: why}))
}

// shutdown stops what the agent started: SIGTERM to the ranks and the end
// of input to the children agents, SIGKILL after the kill grace.
func (a *agent) shutdown() {
	var running []*agentRank
	for _, r := range a.ranks {
		if r.stdin != nil {
			r.stdin.stop()
		}
		select {
		case <-r.done:
		default:
			running = append(running, r)
			r.proc.Signal(syscall.SIGTERM)
		}
	}
	grace := a.setup.KillGrace
	if grace <= 0 {
		grace = DefaultKillGrace
	}
	children := make(chan struct{})
	go func() {
		if a.sp != nil {
			a.sp.close(grace + 2*time.Second)
		}
		close(children)
	}()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for _, r := range running {
		select {
		case <-r.done:
		case <-timer.C:
			for _, r := range running {
				r.proc.Signal(syscall.SIGKILL)
			}
			<-r.done
		}
	}
	for _, r := range running {
		<-r.done
	}
	<-children
	if err := a.cg.Close(); err != nil {
		a.logf("%v", err)
	}
	if a.setup.JobID != "" {
		shm.Cleanup(a.setup.JobID) // what ranks that died left in /dev/shm
	}
	if a.preload != "" {
		os.RemoveAll(a.preload)
	}
}

// feedStdin is a rank's stdin on this host: the launcher's stdin frames
// go to a stdinSink, whose goroutine writes them to the rank's pipe, so
// that a rank that reads slowly, or not at all, holds up its own input
// only, never the agent's frames (its signals, the other ranks' input).
// Each write is acknowledged up (frameStdinAck); the launcher keeps no
// more than stdinWindow bytes unacknowledged, so the sink's queue stays
// within its limit and push never waits. When the rank closes its stdin
// (or exits), an empty acknowledgement says so, and the launcher sends no
// more.
func (a *agent) feedStdin(rank int, w *os.File) *stdinSink {
	s := newStdinSink(w, 2*stdinWindow)
	s.written = func(n int, err error) {
		if err != nil {
			a.send(frame{Type: frameStdinAck, Host: a.self, Rank: rank})
		} else {
			a.send(u32Frame(frameStdinAck, a.self, rank, n))
		}
	}
	go s.run()
	return s
}

// frameWriter sends a rank's output up in frames.
type frameWriter struct {
	a      *agent
	rank   int
	stream byte
}

func (w *frameWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), outputChunk)
		payload := make([]byte, 0, k+1)
		payload = append(append(payload, w.stream), p[:k]...)
		w.a.send(frame{Type: frameOutput, Host: w.a.self, Rank: w.rank, Payload: payload})
		p = p[k:]
	}
	return n, nil
}

func (w *frameWriter) Close() error { return nil }

func hasVar(env []string, name string) bool {
	_, ok := envValue(env, name)
	return ok
}

// envValue is name's value in env ("NAME=VALUE" entries), the last setting
// winning as it does for a process started with env.
func envValue(env []string, name string) (string, bool) {
	v, found := "", false
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, name+"="); ok {
			v, found = val, true
		}
	}
	return v, found
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func cwd() string {
	d, _ := os.Getwd()
	return d
}
