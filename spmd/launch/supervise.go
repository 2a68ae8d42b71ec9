package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// job is one run of a jobPlan: it starts the ranks and supervises them. It is
// used by one goroutine, Launcher.Run's.
type job struct {
	l      *Launcher
	cfg    *Config
	plan   *jobPlan
	out    *output
	logf   func(format string, args ...any)
	secret []byte
	// starter starts the ranks; nil: the Launcher's, or Local.
	starter starter

	procs []proc // the started ranks, in rank order
	// failed says that the job stopped because a rank failed or a host
	// was lost (not a signal, the timeout or a start failure): a failure
	// --max-restarts starts the job again after.
	failed bool
}

// ended is a rank that ended.
type ended struct {
	rank   int
	status status
}

// supervisor state, owned by job.run.
type supervisor struct {
	*job
	running  int
	status   int  // the job's exit status, once decided
	decided  bool // the first failure, signal, or timeout has set status
	stopping bool // the ranks have been told to stop
	signals  int  // stop signals received
	piped    bool // a SIGPIPE came: gorun's output is closed
	grace    <-chan time.Time
	timeout  <-chan time.Time // fires at --timeout
	ctxDone  <-chan struct{}  // the run's context; nil once acted on
	stalled  <-chan []int     // the ranks missing at the rendezvous when the first gave up
	// held is a rank's failure with an exit status, kept for holdFailure
	// (hold) before it decides the job, in case another rank was killed
	// by a signal meanwhile: the likelier cause, whose peers then fail
	// with a status of their own, and may be reaped first.
	held     *ended
	hold     <-chan time.Time
	heldAt   time.Time
	ends     map[int]status   // how the ranks that ended did
	agents   hostAgents       // the agents of the ranks on other hosts; nil: none
	pinged   []string         // the hosts of the held failure's lost peers (failure.go)
	killedAt time.Time        // when SIGKILL was first sent; zero: not yet
	answer   <-chan time.Time // fires killAnswer after killedAt (silent.go)
	// outFailed is closed when a write to gorun's stdout or stderr
	// failed; nil once acted on.
	outFailed <-chan struct{}
}

// run starts every rank and supervises them until all have ended, then
// returns the job's exit status. Signals, the timeout and ranks' exits are
// acted on between starts too: a Ctrl-C while 150 busy ranks start stops
// the starting at once, and a rank that fails at once stops the job before
// the rest have started.
func (j *job) run(ctx context.Context, seed Seed) int {
	s := &supervisor{job: j, ctxDone: ctx.Done(), outFailed: j.out.failed}
	s.agents, _ = j.starterOf().(hostAgents)
	if !j.cfg.deadline.IsZero() {
		t := time.NewTimer(time.Until(j.cfg.deadline))
		defer t.Stop()
		s.timeout = t.C
	}
	if seed != nil {
		stop := j.watchSeed(ctx, seed, s)
		defer stop()
	}
	exits := make(chan ended, len(j.plan.Ranks))
	stdins := j.stdin()
	for _, rp := range j.plan.Ranks {
		if s.poll(exits); s.stopping {
			break
		}
		p, err := j.start(rp, stdins[rp.Rank])
		if err != nil {
			if len(j.procs) == 0 { // nothing to stop, nothing started to count
				j.out.Logf("%v", err)
			} else {
				j.out.Logf("%v; stopping the other ranks", err)
			}
			s.decide(startFailure(err))
			s.stop()
			break
		}
		j.procs = append(j.procs, p)
		s.running++
		go func() { exits <- ended{rp.Rank, p.Wait()} }()
		// A remote rank's Pid waits for its agent's word, which a frozen
		// agent or a host cut off never sends: the cluster logs it.
		if _, remote := p.(*remoteProc); !remote {
			j.logf("started rank %d (pid %d on %s)", rp.Rank, p.Pid(), rp.Host)
		}
	}
	if n := len(j.procs); n > 0 && n < len(j.plan.Ranks) && s.stopping && s.decided {
		j.out.Logf("%d of %d ranks were started before the job stopped", n, len(j.plan.Ranks))
	}
	for _, f := range stdins[len(j.procs):] {
		if f != nil {
			f.Close()
		}
	}
	if seed != nil && j.cfg.Verbose && len(j.procs) == len(j.plan.Ranks) {
		done := j.waitSeed(ctx, seed)
		defer done()
	}
	status := s.loop(ctx, exits)
	j.logf("every rank has ended")
	return status
}

// poll acts on every event that has come, without waiting.
func (s *supervisor) poll(exits <-chan ended) {
	for {
		select {
		case e := <-exits:
			s.running--
			s.ended(e)
		case sig := <-s.l.Signals:
			s.signal(sig)
		case <-s.timeout:
			s.timedOut()
		case <-s.grace:
			s.graceOver()
		case <-s.ctxDone:
			s.ctxDone = nil
			s.cancelled()
		case m := <-s.stalled:
			s.stalledStart(m)
		case <-s.hold:
			s.holdOver()
		case <-s.answer:
			s.answerOver()
		case <-s.outFailed:
			s.outFailed = nil
			s.outputFailed(s.out.writeErr())
		default:
			return
		}
	}
}

// loop acts on events until every started rank has ended.
func (s *supervisor) loop(ctx context.Context, exits <-chan ended) int {
	var reap <-chan os.Signal
	if s.starter == nil { // ranks started here: orphans of theirs come here
		var stop func()
		reap, stop = orphanExits()
		defer stop()
	}
	for s.running > 0 || s.waitSignal() {
		select {
		case <-reap:
			// In the goroutine that starts the ranks, so that no rank is
			// started but not yet known here.
			started := make(map[int]bool, len(s.procs))
			for _, p := range s.procs {
				started[p.Pid()] = true
			}
			reapOrphans(started)
		case e := <-exits:
			s.running--
			s.ended(e)
		case sig := <-s.l.Signals:
			s.signal(sig)
		case <-s.timeout:
			s.timedOut()
		case <-s.grace:
			s.graceOver()
		case <-s.ctxDone:
			s.ctxDone = nil
			s.cancelled()
		case m := <-s.stalled:
			s.stalledStart(m)
		case <-s.hold:
			s.holdOver()
		case <-s.answer:
			s.answerOver()
		case <-s.outFailed:
			s.outFailed = nil
			s.outputFailed(s.out.writeErr())
		}
	}
	s.release()
	if !s.decided && ctx.Err() != nil {
		return 1
	}
	return s.status
}

// timedOut stops the job at --timeout.
func (s *supervisor) timedOut() {
	s.timeout = nil
	s.decide(exitTimeout)
	s.out.Logf("job timed out after %v; %s", time.Duration(s.cfg.Timeout), s.stopWhat())
	s.stop()
}

// graceOver kills what still runs when the kill grace is over; ranks on
// other hosts get killAnswer more to end (silent.go). Ranks that ended
// and whose output is still being written (to a stdout read slowly) are
// not named: there is nothing left of them to kill.
func (s *supervisor) graceOver() {
	s.grace = nil
	if s.alive() > 0 {
		s.out.Logf("%s did not end within the kill grace of %v (--kill-grace): killing %s (SIGKILL)", s.ranks(), time.Duration(s.cfg.KillGrace), s.them())
	}
	s.kill()
}

// decide sets the job's exit status unless it was set already: the first
// cause of the job's end decides it.
func (s *supervisor) decide(status int) {
	s.release() // a failure held came first
	if !s.decided {
		s.status, s.decided = status, true
	}
}

// stop sends SIGTERM to every rank once and arms the kill grace: for a
// failed rank or the timeout.
func (s *supervisor) stop() { s.stopWith(syscall.SIGTERM) }

// stopWith sends sig to every rank once and arms the kill grace. A signal
// gorun received is passed on as it came, as torchrun does: SIGINT as
// SIGINT, so that a Python rank gets KeyboardInterrupt and runs its
// finally blocks (saving a checkpoint on Ctrl-C, say).
func (s *supervisor) stopWith(sig syscall.Signal) {
	if s.stopping {
		return
	}
	s.stopping = true
	s.signalAll(sig)
	s.grace = time.After(time.Duration(s.cfg.KillGrace))
}

func (s *supervisor) signalAll(sig syscall.Signal) {
	for _, p := range s.procs {
		p.Signal(sig)
	}
}

// alive counts the started ranks whose processes run: not those that have
// ended and whose output is still being written.
func (s *supervisor) alive() int {
	n := 0
	for r, p := range s.procs {
		if _, done := s.ends[r]; !done && !p.Exited() {
			n++
		}
	}
	return n
}

// ranks names the running ranks for a message: "the 3 running ranks",
// "the running rank", or "no rank".
func (s *supervisor) ranks() string {
	switch n := s.alive(); n {
	case 0:
		return "no rank"
	case 1:
		return "the running rank"
	default:
		return "the " + itoa(n) + " running ranks"
	}
}

// them is the pronoun for the running ranks: "them", or "it" for one.
func (s *supervisor) them() string { return pronoun(s.alive(), "it", "them") }

// stopWhat says what stopping the job stops, for the line of its cause:
// "stopping the 3 running ranks"; where none runs, that none had started
// (a --timeout shorter than the start) or that all have ended.
func (s *supervisor) stopWhat() string {
	switch {
	case s.alive() > 0:
		return "stopping " + s.ranks()
	case len(s.procs) == 0:
		return "stopping the job before any rank started"
	}
	return "stopping the job, whose ranks have all ended"
}

func itoa(n int) string { return strconv.Itoa(n) }

// start starts one rank.
func (j *job) start(rp rankPlan, stdin *os.File) (proc, error) {
	stdout, stderr, err := j.out.RankWriters(rp.Rank, j.cfg.OutputDir)
	if err != nil {
		// Not the program's fault: a directory gorun cannot write is
		// status 1, not the shell's 126 for a program it cannot run.
		return nil, fmt.Errorf("%w: %w", errNotProgram, err)
	}
	p, err := j.starterOf().Start(&spec{
		Rank: rp, Path: j.plan.Apps[rp.App].Program, Args: j.plan.Apps[rp.App].Args, Dir: j.cfg.Wdir,
		Env:    append(inheritedEnv(), rp.Env...),
		Secret: j.secret, Stdin: stdin, Stdout: stdout, Stderr: stderr, Cgroup: j.l.cgroup,
	})
	if err != nil {
		stdout.Close()
		stderr.Close()
		return nil, err
	}
	return p, nil
}

// starterOf returns the job's starter: its own, the Launcher's, or local.
func (j *job) starterOf() starter {
	switch {
	case j.starter != nil:
		return j.starter
	case j.l.starter != nil:
		return j.l.starter
	}
	return local{}
}

// startFailure is the job's status when a rank could not be started: 2
// for a usage error (a --bind-to that overloads a core), else as a shell
// would report the program (127 not found, 126 not executable or not a
// program this machine can run), else 1.
func startFailure(err error) int {
	switch {
	case errors.Is(err, ErrUsage):
		return 2
	case errors.Is(err, errNotProgram):
		return 1
	case errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return 126
	}
	return 1
}

// errNotProgram marks a start failure that is not about the program, so
// that a permission error in it does not read as "not executable".
var errNotProgram = errors.New("could not start the rank")

// inheritedEnv is gorun's environment without the per-job variables of an
// outer job, which the plan sets afresh, and without what the plan tells
// starters (GORUN_BIND_TO, GORUN_REPORT_BINDINGS, GORUN_TIMER_SLACK): a
// gorun run by a rank of a bound job would have bound its own ranks so.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !isContractVar(name) && !starterVars[name] {
			env = append(env, kv)
		}
	}
	return env
}

// starterVars are the plan's word to the starters, which gorun's own
// environment must not give instead.
var starterVars = map[string]bool{contract.EnvBindTo: true, contract.EnvReportBindings: true, contract.EnvTimerSlack: true}

// watchSeed watches the rendezvous: if the first rank to register would
// give up waiting before every rank has, the ranks still missing come to
// s.stalled. The returned function stops watching and returns once the
// watching goroutine has.
func (j *job) watchSeed(ctx context.Context, seed Seed, s *supervisor) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	stalled := make(chan []int, 1)
	s.stalled = stalled
	go func() {
		defer close(done)
		if m, err := seed.Watch(ctx); err == nil && len(m) > 0 {
			stalled <- m
		}
	}()
	return func() { cancel(); <-done }
}

// stalledStart stops a job some of whose ranks never reached spmd.Init
// in the time the others wait there, with one message for the job
// instead of one from every rank that waited.
func (s *supervisor) stalledStart(missing []int) {
	s.stalled = nil
	if s.decided {
		return
	}
	s.decide(1)
	// A rank that exited (a program that never calls spmd.Init, in an MPMD
	// job of ones that do) is named as such.
	var exited []string
	for _, r := range missing {
		if st, ok := s.ends[r]; ok {
			exited = append(exited, fmt.Sprintf("rank %d %v", r, st))
		}
	}
	why := ""
	if len(exited) > 0 {
		why = "; " + strings.Join(exited, ", ") + " without calling it"
	}
	s.out.Logf("%s of %d never reached spmd.Init while the others waited there (GORUN_INIT_TIMEOUT)%s; stopping the job", contract.RankList(missing), len(s.plan.Ranks), why)
	s.stop()
}

// waitSeed logs when every rank has joined the seed; the returned function
// stops waiting and returns once the waiting goroutine has.
func (j *job) waitSeed(ctx context.Context, seed Seed) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t0 := time.Now()
		if err := seed.Wait(ctx, len(j.plan.Ranks)); err == nil {
			j.logf("all %d %s ready after %v", len(j.plan.Ranks), plural(len(j.plan.Ranks), "rank"), time.Since(t0).Round(time.Millisecond))
		}
	}()
	return func() { cancel(); <-done }
}

// stdin returns, per rank, the read end of the pipe that rank reads its
// stdin from (nil: /dev/null), and starts copying l.Stdin into them.
// The copying goroutine ends at the end of gorun's stdin or once no rank
// reads any more; while gorun's stdin is silent it stays blocked reading
// it, so it may outlive Run (gorun exits then anyway).
func (j *job) stdin() []*os.File {
	files := make([]*os.File, len(j.plan.Ranks))
	target, _ := j.cfg.StdinRank()
	if j.l.Stdin == nil || target == stdinNone {
		return files
	}
	var dsts []*os.File
	for r := range files {
		if target != StdinAll && r != target {
			continue
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			j.out.Logf("stdin for rank %d: %v", r, err)
			continue
		}
		files[r] = pr
		dsts = append(dsts, pw)
	}
	var src io.Reader = j.l.Stdin
	if ttyStdin(j.l.Stdin) {
		src = ttyReader{j.l.Stdin}
	}
	go forwardStdin(src, dsts, stdinBuffer, j.out.Logf)
	return files
}
