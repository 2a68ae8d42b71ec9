package launch

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// spec is everything needed to start one rank.
type spec struct {
	Rank rankPlan
	Path string   // absolute path of the executable
	Args []string // arguments after the program name
	Dir  string   // working directory; "" inherits
	Env  []string // the complete environment of the rank
	// Secret is the per-job secret; the rank reads it, in hex and ending
	// with a newline, from descriptor secretFD (GORUN_SECRET_FD).
	Secret []byte
	// Stdin is what the rank reads on its standard input; nil means
	// /dev/null. Start takes ownership of it.
	Stdin *os.File
	// Stdout and Stderr receive the rank's output. The proc closes them once
	// the output is drained, before Wait returns.
	Stdout, Stderr io.WriteCloser
	// Cgroup is the job's cgroup on this host, which local starts the rank
	// in; nil: none. (An agent starts its ranks in a cgroup of its own.)
	Cgroup *cgroup
}

// starter starts ranks. Local starts them as child processes; a remote
// agent (ssh, srun) implements starter to start the ranks of its host and
// forward their output, exit status and signals.
type starter interface {
	Start(spec *spec) (proc, error)
}

// proc is a started rank. Its methods are safe for concurrent use.
type proc interface {
	// Pid is the process id of the rank on its host.
	Pid() int
	// Signal sends sig to the rank's process group (the rank and its
	// children). Signalling a rank that has ended is not an error.
	Signal(sig syscall.Signal) error
	// Wait blocks until the rank has ended, its process group is gone and
	// its output is drained; it returns how the rank ended.
	Wait() status
	// Exited reports whether the rank's process is known to have ended,
	// though Wait may still wait for its output to be written.
	Exited() bool
}

// status is how a rank ended.
type status struct {
	Code   int            // exit code when Signal is 0
	Signal syscall.Signal // the signal that killed the rank, or 0
	// Lost, when set, says that the rank's host was lost and how: its
	// agent's connection ended with the rank still running, or gorun gave
	// the host up.
	Lost string
	// LostHost is the host that Lost is about: the rank's own, or the
	// host through whose agent the spawn tree reached it, whose loss
	// took the rank's host with it.
	LostHost string
	// LostPeers are the ranks this rank's spmd reported lost before it
	// ended (GORUN_STATUS_FD), in order; an agent passes them on.
	LostPeers []int
	// StartErr, when set, says that the rank's host could not start it,
	// and why ("host h2: rank 3: start ./prog: ..."); Code is then what
	// startFailure gave there (127 not found, 126 not executable, 2 a
	// --wdir the host lacks). The supervisor treats it as a start failure.
	StartErr string
}

// exitLost is the status of a rank whose host was lost, as ssh exits when
// the connection fails.
const exitLost = 255

// Success reports whether the rank exited with status 0.
func (s status) Success() bool {
	return s.Code == 0 && s.Signal == 0 && s.Lost == "" && s.StartErr == ""
}

// ExitCode is the shell's view: the exit code, or 128+signal, or exitLost.
func (s status) ExitCode() int {
	if s.Lost != "" {
		return exitLost
	}
	if s.Signal != 0 {
		return 128 + int(s.Signal)
	}
	return s.Code
}

// String says how the rank ended: "exited with status 3" or "was killed by
// signal 9 (killed)".
func (s status) String() string {
	if s.StartErr != "" {
		return "could not be started: " + s.StartErr
	}
	if s.Lost != "" && s.LostHost != "" {
		return "was lost: host " + s.LostHost + ": " + s.Lost
	}
	if s.Lost != "" {
		return "was lost: " + s.Lost
	}
	if s.Signal != 0 {
		return fmt.Sprintf("was killed by signal %d (%v)", int(s.Signal), s.Signal)
	}
	return fmt.Sprintf("exited with status %d", s.Code)
}

// drainTimeout bounds the wait for more output after a rank's process
// group was killed: only a process that left the group can still hold the
// pipes, so a pipe that stays silent this long is given up. Output still
// arriving is read, however long it takes to write it on.
const drainTimeout = 2 * time.Second

// local starts ranks as child processes of this one, each in its own
// process group, killed with SIGKILL if this process dies (Linux).
type local struct{}

var _ starter = local{}

// Start starts the rank described by spec.
func (local) Start(spec *spec) (proc, error) {
	host := hostname()
	bind, err := bindingFor(spec.Env, hostCPUs, host, spec.Path)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", spec.Rank.Rank, err)
	}
	slack, err := slackFor(spec.Env, bind, spec.Path)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", spec.Rank.Rank, err)
	}
	secretR, err := secretPipe(spec.Secret)
	if err != nil {
		return nil, err
	}
	defer secretR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer outW.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		return nil, err
	}
	defer errW.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	defer statW.Close()

	if spec.Stdin != nil {
		defer spec.Stdin.Close()
	}
	start := func(inCgroup bool) (*exec.Cmd, error) {
		cmd := exec.Command(spec.Path, spec.Args...)
		cmd.Dir = spec.Dir
		cpus := runtime.NumCPU() // the starter's: the CPUs the host's ranks share
		cmd.Env = append(boundEnv(procsEnv(spec.Env, spec.Rank, bind, cpus), bind, cpus), contract.EnvStatusFD+"="+strconv.Itoa(statusFD))
		if spec.Stdin != nil {
			cmd.Stdin = spec.Stdin
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.ExtraFiles = []*os.File{secretR, statW} // secretFD, statusFD
		cmd.SysProcAttr = sysProcAttr()
		if inCgroup {
			spec.Cgroup.procAttr(cmd.SysProcAttr)
		}
		return cmd, startWith(cmd, bind.cpus, slack)
	}
	inCgroup := spec.Cgroup.on()
	cmd, err := start(inCgroup)
	if err != nil && inCgroup {
		// The clone into the cgroup, or the program, failed: if the
		// program starts outside the cgroup, the cgroup was to blame.
		var err2 error
		if cmd, err2 = start(false); err2 == nil {
			spec.Cgroup.failed(err)
		}
		err = err2
	}
	if err != nil {
		outR.Close()
		errR.Close()
		statR.Close()
		return nil, fmt.Errorf("rank %d: start %s: %w", spec.Rank.Rank, spec.Path, err)
	}
	if bind.report {
		what := bind.what
		if slack.d > 0 {
			what += fmt.Sprintf(", timer slack %v", slack.d)
		}
		fmt.Fprintf(errW, "gorun: rank %d on %s (pid %d): %s\n", spec.Rank.Rank, host, cmd.Process.Pid, what)
	}
	p := &localProc{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{}), stopping: make(chan struct{})}
	p.drained.Add(3)
	go p.copy(spec.Stdout, outR)
	go p.copy(spec.Stderr, errR)
	go p.readStatus(statR)
	go p.wait(outR, errR, statR)
	return p, nil
}

// secretPipe returns the read end of a pipe that holds hex(secret)+"\n".
func secretPipe(secret []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("secret pipe: %w", err)
	}
	defer w.Close()
	// 65 bytes fit the pipe buffer: this does not block.
	if _, err := io.WriteString(w, hex.EncodeToString(secret)+"\n"); err != nil {
		r.Close()
		return nil, fmt.Errorf("secret pipe: %w", err)
	}
	return r, nil
}

type localProc struct {
	cmd      *exec.Cmd
	pid      int
	drained  sync.WaitGroup // the two output copiers and readStatus
	done     chan struct{}  // closed when status is set
	stopping chan struct{}  // closed by the first Signal: the job is being stopped
	stop     sync.Once
	over     atomic.Bool // the rank has ended: the copiers read with a deadline

	mu     sync.Mutex // protects following
	ended  bool       // the group was killed after the leader ended
	status status
	lost   []int // the peers the rank reported lost (readStatus)
}

func (p *localProc) Pid() int { return p.pid }

func (p *localProc) Signal(sig syscall.Signal) error {
	p.stop.Do(func() { close(p.stopping) })
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil
	}
	err := syscall.Kill(-p.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Exited reports whether the rank was reaped (its group killed after it).
func (p *localProc) Exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

func (p *localProc) Wait() status {
	<-p.done
	return p.status
}

// wait reaps the rank, kills what is left of its process group, and waits
// for the output to drain.
func (p *localProc) wait(outR, errR, statR *os.File) {
	err := p.cmd.Wait()
	st := statusOf(p.cmd.ProcessState, err)
	p.mu.Lock()
	syscall.Kill(-p.pid, syscall.SIGKILL)
	p.ended = true
	p.mu.Unlock()
	p.over.Store(true)
	deadline := time.Now().Add(drainTimeout)
	outR.SetReadDeadline(deadline)
	errR.SetReadDeadline(deadline)
	statR.SetReadDeadline(deadline)
	// A rank that ended by itself has all its output written, however
	// slowly gorun's stdout is read. But once the job is being stopped
	// (Signal), a copier blocked writing to a stdout nobody reads is not
	// waited for past the drain deadline: gorun must exit within its
	// timeout and kill grace. Its goroutine ends with the write, or with
	// gorun.
	drained := make(chan struct{})
	go func() {
		p.drained.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-p.stopping:
		select {
		case <-drained:
		case <-time.After(max(time.Until(deadline), drainTimeout)):
		}
	}
	p.mu.Lock()
	st.LostPeers = p.lost
	p.mu.Unlock()
	p.status = st
	close(p.done)
}

// readStatus reads what the rank's spmd reports (GORUN_STATUS_FD): a
// line "lost R" for each peer it lost, which the supervisor uses to name
// the first failure. Other lines are ignored.
func (p *localProc) readStatus(src *os.File) {
	defer p.drained.Done()
	defer src.Close()
	lines := bufio.NewScanner(src)
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "lost "); ok {
			if r, err := strconv.Atoi(v); err == nil {
				p.mu.Lock()
				p.lost = append(p.lost, r)
				p.mu.Unlock()
			}
		}
	}
}

// copy forwards a rank's output. Once the rank has ended (over), each
// read waits at most drainTimeout for more, so that a pipe held open by a
// process that escaped the group is given up when it falls silent, while
// output that is still coming, held up only by a slow reader of gorun's
// own stdout, is all forwarded.
func (p *localProc) copy(dst io.WriteCloser, src *os.File) {
	defer p.drained.Done()
	buf := make([]byte, 32<<10)
	for {
		if p.over.Load() {
			src.SetReadDeadline(time.Now().Add(drainTimeout))
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
}

func statusOf(ps *os.ProcessState, err error) status {
	if ps == nil {
		return status{Code: 127}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return status{Signal: ws.Signal()}
	}
	return status{Code: ps.ExitCode()}
}
