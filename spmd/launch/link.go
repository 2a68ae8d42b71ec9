package launch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// link is the connection to one agent this process started: the ssh (or
// srun) process, frames down through its stdin, frames up from its stdout.
// Its goroutines are owned by the link and end after Close, or when the
// process ends; done closes when they have.
type link struct {
	t       target
	argv    []string
	onFrame func(link *link, f frame)       // called on the reader goroutine
	onLost  func(link *link, reason string) // called once, on the reader goroutine
	logf    func(format string, args ...any)

	out    outbox
	stderr tail
	done   chan struct{} // closed when the reader has reported the end
	code   int           // the agent's command's exit status; set, like onLost's call, on the reader goroutine
	// heard is when the last frame came from the agent, in the
	// parent's watchdog time (watchdog.now); 0 before its hello.
	heard atomic.Int64
	busy  atomic.Bool // the reader is handling a frame

	mu    sync.Mutex // protects following
	cmd   *exec.Cmd
	fatal string // why this side gave the agent up, which says all
}

// startLink starts argv and reads the agent's frames; before, preload (if
// set) runs and may change argv. It returns at once; failures come through
// onLost.
func startLink(t target, argv []string, preload func() ([]string, error), logf func(string, ...any),
	onFrame func(*link, frame), onLost func(*link, string)) *link {
	l := &link{t: t, argv: argv, onFrame: onFrame, onLost: onLost, logf: logf, done: make(chan struct{})}
	l.out.init()
	go l.run(preload)
	return l
}

func (l *link) run(preload func() ([]string, error)) {
	defer close(l.done)
	if preload != nil {
		argv, err := preload()
		if err != nil {
			l.out.close()
			l.onLost(l, err.Error())
			return
		}
		l.argv = argv
	}
	cmd := exec.Command(l.argv[0], l.argv[1:]...)
	// Its own process group: a Ctrl-C at the terminal reaches gorun, which
	// stops the job in order, not ssh, which would drop the connection.
	cmd.SysProcAttr = sysProcAttr()
	stdin, err1 := cmd.StdinPipe()
	stdout, err2 := cmd.StdoutPipe()
	cmd.Stderr = &l.stderr
	if err := errors.Join(err1, err2); err != nil {
		l.out.close()
		l.onLost(l, err.Error())
		return
	}
	l.logf("starting the agent of host %s: %s", l.t.Name, strings.Join(l.argv, " "))
	if err := cmd.Start(); err != nil {
		l.out.close()
		l.onLost(l, fmt.Sprintf("cannot run %s: %v", l.argv[0], err))
		return
	}
	l.mu.Lock()
	l.cmd = cmd
	l.mu.Unlock()
	go l.out.drain(stdin)
	reason := l.read(bufio.NewReaderSize(stdout, 64<<10))
	l.out.close()
	// The agent is gone or talks nonsense: make sure the process ends.
	timer := time.AfterFunc(2*time.Second, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	timer.Stop()
	l.onLost(l, l.exitReason(reason, err))
}

// read reads frames until the end of the agent's output and returns why it
// stopped ("" for a clean end).
func (l *link) read(r *bufio.Reader) string {
	junk, err := skipPreamble(r)
	if len(bytes.TrimSpace(junk)) > 0 { // the agent itself writes one newline first
		l.logf("host %s: discarded %d bytes before the agent's preamble: %q", l.t.Name, len(junk), trim(junk, 200))
	}
	if err != nil {
		var pe *protocolError
		switch {
		case err == io.EOF:
			return ""
		case errors.As(err, &pe):
			l.setFatal(err.Error())
		}
		return err.Error()
	}
	for {
		f, err := readFrame(r)
		if err != nil {
			if err == io.EOF {
				return ""
			}
			return err.Error()
		}
		// Busy handling a frame (a rank's output that gorun's stdout
		// does not take), the reader is not hearing the agent: its
		// silence does not count then.
		l.heard.Store(int64(mono()))
		l.busy.Store(true)
		l.onFrame(l, f)
		l.busy.Store(false)
		l.heard.Store(int64(mono()))
	}
}

// exitReason says how the agent's connection ended: "ssh exited 255: ssh:
// connect to host ... timed out".
func (l *link) exitReason(reason string, err error) string {
	l.mu.Lock()
	fatal := l.fatal
	l.mu.Unlock()
	if fatal != "" {
		return fatal // how the agent's process then ended says nothing more
	}
	prog := filepath.Base(l.argv[0])
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.Exited():
		l.code = ee.ExitCode()
		reason = joinReason(fmt.Sprintf("%s exited %d", prog, ee.ExitCode()), reason)
	case errors.As(err, &ee):
		reason = joinReason(fmt.Sprintf("%s %v", prog, status{Signal: ee.Sys().(syscall.WaitStatus).Signal()}), reason)
	case err != nil:
		reason = joinReason(fmt.Sprintf("%s: %v", prog, err), reason)
	default:
		reason = joinReason(prog+" exited 0", reason)
	}
	if last := l.stderr.last(); last != "" {
		reason += ": " + last
	}
	return reason
}

func joinReason(a, b string) string {
	if b == "" {
		return a
	}
	return a + " (" + b + ")"
}

// send queues f for the agent; it never blocks.
func (l *link) send(f frame) { l.out.put(appendFrame(nil, f)) }

// close ends the agent's input once what was queued is written: the agent
// then stops its ranks and exits.
func (l *link) close() { l.out.close() }

// setFatal gives the reason the agent's end will be reported with, in
// place of how its process ended; the first reason stays, and only the
// first call returns true.
func (l *link) setFatal(why string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fatal != "" {
		return false
	}
	l.fatal = why
	return true
}

// kill kills the ssh process group at once.
func (l *link) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cmd != nil && l.cmd.Process != nil {
		syscall.Kill(-l.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// outbox queues encoded frames and writes them from its own goroutine, so
// that a slow or dead agent never blocks the caller.
type outbox struct {
	mu      sync.Mutex // protects following
	cond    sync.Cond
	q       [][]byte
	closed  bool
	writing bool            // drain is writing what it took from q
	waiters []chan struct{} // flushed's, closed when q is written
}

// flushed returns a channel closed once what was queued before the call
// is written (or the outbox is closed).
func (o *outbox) flushed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := make(chan struct{})
	if o.closed || len(o.q) == 0 && !o.writing {
		close(ch)
	} else {
		o.waiters = append(o.waiters, ch)
	}
	return ch
}

// wakeLocked closes the flushed channels when nothing is left to write.
// o.mu must be held.
func (o *outbox) wakeLocked() {
	if o.closed || len(o.q) == 0 && !o.writing {
		for _, ch := range o.waiters {
			close(ch)
		}
		o.waiters = nil
	}
}

func (o *outbox) init() { o.cond.L = &o.mu }

func (o *outbox) put(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.closed {
		o.q = append(o.q, b)
		o.cond.Signal()
	}
}

func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.cond.Signal()
	o.wakeLocked()
}

// drain writes queued frames to w until close, then closes w.
func (o *outbox) drain(w io.WriteCloser) {
	defer w.Close()
	for {
		o.mu.Lock()
		for len(o.q) == 0 && !o.closed {
			o.cond.Wait()
		}
		q := o.q
		o.q = nil
		closed := o.closed
		o.writing = true
		o.mu.Unlock()
		for _, b := range q {
			if _, err := w.Write(b); err != nil {
				o.close()
				return
			}
		}
		o.mu.Lock()
		o.writing = false
		o.wakeLocked()
		o.mu.Unlock()
		if closed && len(q) == 0 {
			return
		}
	}
}

// tail keeps the last few KiB written to it: an ssh's stderr.
type tail struct {
	mu sync.Mutex // protects b
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append(t.b[:0], t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

// last returns the last non-empty line.
func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func trim(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
