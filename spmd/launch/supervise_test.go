package launch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeStarter starts fake ranks in this process: what a remote agent looks
// like to the supervisor. Each rank ends with exits[rank] when it gets that
// status from the test, or with 128+sig when signalled (unless it ignores
// SIGTERM).
type fakeStarter struct {
	mu      sync.Mutex // protects procs
	procs   []*fakeProc
	ignore  bool   // ranks ignore SIGTERM
	stuckOn string // ranks on this host ignore every signal, SIGKILL too
	start   chan int
}

func (s *fakeStarter) Start(spec *spec) (proc, error) {
	p := &fakeProc{pid: 1000 + spec.Rank.Rank, host: spec.Rank.Host, done: make(chan struct{}), ignore: s.ignore,
		stuck: spec.Rank.Host == s.stuckOn, out: spec.Stdout, errw: spec.Stderr}
	fmt.Fprintf(spec.Stdout, "rank %d up\n", spec.Rank.Rank)
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	s.start <- spec.Rank.Rank
	return p, nil
}

func (s *fakeStarter) proc(r int) *fakeProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[r]
}

type fakeProc struct {
	pid       int
	host      string
	ignore    bool
	stuck     bool
	out, errw interface{ Close() error }

	once sync.Once     // ends the rank once: its first end wins
	done chan struct{} // closed when st is set
	st   status

	mu      sync.Mutex // protects signals
	signals []syscall.Signal
}

func (p *fakeProc) Pid() int { return p.pid }

func (p *fakeProc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	p.signals = append(p.signals, sig)
	p.mu.Unlock()
	if !p.stuck && (sig == syscall.SIGKILL || !p.ignore) {
		p.exit(status{Signal: sig})
	}
	return nil
}

// exit ends the rank with st unless it has ended. (A channel of one
// status, read and put back by Wait, let a second end fill it between the
// two: Wait then blocked.)
func (p *fakeProc) exit(st status) {
	p.once.Do(func() {
		p.st = st
		close(p.done)
	})
}

func (p *fakeProc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *fakeProc) Wait() status {
	<-p.done
	p.out.Close()
	p.errw.Close()
	return p.st
}

// runFake runs a job of n fake ranks; drive acts on them once all started.
func runFake(t *testing.T, n int, ignoreTerm bool, sigs chan os.Signal, drive func(*fakeStarter)) (int, string, string) {
	t.Helper()
	st := &fakeStarter{ignore: ignoreTerm, start: make(chan int, n)}
	var stdout, stderr bytes.Buffer
	l := &Launcher{Stdout: &stdout, Stderr: &stderr, starter: st, Signals: sigs}
	cfg := DefaultConfig()
	cfg.NP, cfg.Program = n, "/bin/true"
	done := make(chan int)
	var runErr error
	go func() {
		code, err := l.Run(context.Background(), cfg)
		runErr = err
		done <- code
	}()
	for i := 0; i < n; i++ {
		<-st.start
	}
	drive(st)
	code := <-done
	if runErr != nil {
		t.Fatal(runErr)
	}
	return code, stdout.String(), stderr.String()
}

func TestSuperviseAllSucceed(t *testing.T) {
	code, out, _ := runFake(t, 3, false, nil, func(s *fakeStarter) {
		for r := 0; r < 3; r++ {
			s.proc(r).exit(status{})
		}
	})
	if code != 0 || strings.Count(out, " up\n") != 3 {
		t.Fatalf("status %d, output %q", code, out)
	}
}

func TestSuperviseFirstFailure(t *testing.T) {
	var others []*fakeProc
	code, _, errOut := runFake(t, 3, false, nil, func(s *fakeStarter) {
		s.proc(2).exit(status{Code: 3})
		others = []*fakeProc{s.proc(0), s.proc(1)}
	})
	if code != 3 {
		t.Errorf("status %d, want 3", code)
	}
	if !strings.Contains(errOut, "gorun: rank 2 (pid 1002 on ") || !strings.Contains(errOut, ") exited with status 3; stopping the other ranks\n") {
		t.Errorf("stderr: %q", errOut)
	}
	for _, p := range others {
		if len(p.signals) == 0 || p.signals[0] != syscall.SIGTERM {
			t.Errorf("rank pid %d got %v, want SIGTERM first", p.pid, p.signals)
		}
	}
}

// TestSuperviseSecondSignalKills: the signal gorun got is passed on as
// it came (SIGINT as SIGINT, as torchrun does; SIGTERM as SIGTERM), and a
// second one kills.
func TestSuperviseSecondSignalKills(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			sigs := make(chan os.Signal, 2)
			var procs []*fakeProc
			code, _, errOut := runFake(t, 2, true, sigs, func(s *fakeStarter) {
				procs = []*fakeProc{s.proc(0), s.proc(1)}
				sigs <- sig
				sigs <- sig
			})
			if code != 128+int(sig) {
				t.Errorf("status %d, want %d", code, 128+int(sig))
			}
			for _, p := range procs {
				if fmt.Sprint(p.signals) != fmt.Sprint([]syscall.Signal{sig, syscall.SIGKILL}) {
					t.Errorf("pid %d got %v, want %v then SIGKILL", p.pid, p.signals, sig)
				}
			}
			if !strings.Contains(errOut, "send it again") {
				t.Errorf("stderr: %q", errOut)
			}
		})
	}
}

// TestTimeoutBeforeStart: a --timeout that is over before the first rank
// starts says so; the line said "stopping the 0 running ranks".
func TestTimeoutBeforeStart(t *testing.T) {
	var stderr syncWriter
	l := &Launcher{Stdout: io.Discard, Stderr: &stderr}
	cfg := DefaultConfig()
	cfg.NP, cfg.Program, cfg.Args, cfg.Quiet = 1, "/bin/sleep", []string{"10"}, true
	cfg.Timeout = Duration(time.Nanosecond) // over when the job starts its first rank
	code, err := l.Run(context.Background(), cfg)
	want := "gorun: job timed out after 1ns; stopping the job before any rank started\n"
	if err != nil || code != exitTimeout || stderr.String() != want {
		t.Errorf("status %d (%v), stderr %q; want %d and %q", code, err, stderr.String(), exitTimeout, want)
	}
}

// TestGraceCountsLiveRanks: gorun's stdout is a pipe nobody reads, and the
// ranks, which wrote all it holds, are stopped by --timeout. The line at
// the end of the kill grace counts only the ranks whose processes still
// run, not those that died of the SIGTERM and whose output is still
// waiting to be written; it named both, and said it killed them.
func TestGraceCountsLiveRanks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		want   string // "": no line about the kill grace
	}{
		{"all dead", "exec yes", ""},
		{"one alive", `[ "$GORUN_RANK" = 0 ] && trap "" TERM; exec yes`,
			"gorun: the running rank did not end within the kill grace of 300ms (--kill-grace): killing it (SIGKILL)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			var stderr syncWriter
			l := &Launcher{Stdout: w, Stderr: &stderr}
			cfg := DefaultConfig()
			cfg.NP, cfg.Program, cfg.Args, cfg.Quiet = 2, "/bin/sh", []string{"-c", tc.script}, true
			cfg.Timeout, cfg.KillGrace = Duration(300*time.Millisecond), Duration(300*time.Millisecond)
			code, err := l.Run(context.Background(), cfg)
			if err != nil || code != exitTimeout {
				t.Fatalf("status %d (%v), want %d; stderr:\n%s", code, err, exitTimeout, stderr.String())
			}
			got := ""
			for _, line := range strings.SplitAfter(stderr.String(), "\n") {
				if strings.Contains(line, "kill grace") {
					got += line
				}
			}
			if got != tc.want {
				t.Errorf("kill grace lines %q, want %q; stderr:\n%s", got, tc.want, stderr.String())
			}
		})
	}
}

// TestOutputFailureStops: a write to gorun's stdout or stderr that fails
// (not EPIPE, which stops the job with 141) stops the job with status 1
// and one line on stderr, unless stderr failed. The errors were ignored:
// a job exited 0 with all its output lost, or ran for ever (yes).
func TestOutputFailureStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string // the one on /dev/full
		script string
		want   string // on stderr
	}{
		{"stdout", "stdout", "echo hi; exec sleep 60", "gorun: writing to stdout: no space left on device; stopping the "},
		{"stdout, a rank that writes for ever", "stdout", "exec yes", "gorun: writing to stdout: no space left on device; stopping the "},
		{"stderr", "stderr", "echo oops >&2; exec sleep 60", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Skip(err)
			}
			defer full.Close()
			var ok syncWriter
			l := &Launcher{Stdout: &ok, Stderr: full}
			if tc.stream == "stdout" {
				l.Stdout, l.Stderr = full, &ok
			}
			cfg := DefaultConfig()
			cfg.NP, cfg.Program, cfg.Args, cfg.Quiet = 2, "/bin/sh", []string{"-c", tc.script}, true
			cfg.KillGrace = Duration(time.Second)
			// A guard against a hang: the job used to run until this ended.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			code, err := l.Run(ctx, cfg)
			if ctx.Err() != nil {
				t.Fatalf("the job ran until the test's guard stopped it; status %d, its other stream:\n%s", code, ok.String())
			}
			if err != nil || code != 1 || !strings.HasPrefix(ok.String(), tc.want) || tc.want != "" && strings.Count(ok.String(), "\n") > 2 {
				t.Errorf("status %d (%v), want 1; other stream %q, want a line %q", code, err, ok.String(), tc.want)
			}
		})
	}
}

// TestOutputFailureNoRestart: a job that failed, and whose stderr then
// failed (its line about the failure could not be written), is not
// started again under --max-restarts: the next start stopped before any
// rank started, with status 1 instead of the failed rank's 3.
func TestOutputFailureNoRestart(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer full.Close()
	runs := filepath.Join(t.TempDir(), "runs")
	l := &Launcher{Stdout: io.Discard, Stderr: full}
	cfg := DefaultConfig()
	cfg.NP, cfg.Program, cfg.Quiet, cfg.MaxRestarts = 1, "/bin/sh", true, 1
	cfg.Args = []string{"-c", "echo run >> " + runs + "; exit 3"}
	code, err := l.Run(context.Background(), cfg)
	b, _ := os.ReadFile(runs)
	if err != nil || code != 3 || string(b) != "run\n" {
		t.Errorf("status %d (%v), runs %q; want 3 and one run", code, err, b)
	}
}
