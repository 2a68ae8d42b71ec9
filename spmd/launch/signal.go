package launch

// Signals sent to gorun while its job runs: passed on, or a stop.

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// signal handles a signal sent to gorun.
func (s *supervisor) signal(sig os.Signal) {
	ss, _ := sig.(syscall.Signal)
	switch ss {
	case syscall.SIGUSR1, syscall.SIGUSR2:
		s.logf("forwarding %v to %s", ss, s.ranks())
		s.signalAll(ss)
		return
	case syscall.SIGTSTP:
		// Ctrl-Z: the ranks run in process groups of their own, which
		// the terminal's stop does not reach, so gorun stops them, then
		// itself; as torchrun's workers, in its group, stop with it.
		s.logf("stopping (SIGSTOP) %s, then gorun (Ctrl-Z)", s.ranks())
		s.signalAll(syscall.SIGSTOP)
		if s.agents != nil {
			s.agents.hold() // the SIGSTOPs written, the watchdogs told to wait
		}
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		return
	case syscall.SIGCONT:
		// fg, bg or kill -CONT: the ranks go on with gorun.
		s.logf("continuing (SIGCONT) %s", s.ranks())
		s.signalAll(syscall.SIGCONT)
		return
	case syscall.SIGPIPE:
		// A SIGPIPE of a write to a rank's stdin, which it did not read,
		// stops nothing.
		if s.out.closed() {
			s.outputClosed()
		}
		return
	}
	s.signals++
	if s.signals > 1 {
		if s.alive() > 0 {
			s.out.Logf("%v again: killing %s", sig, s.ranks())
		}
		s.kill()
		return
	}
	stopSig, already := syscall.SIGTERM, ""
	if ss != 0 {
		already = s.sameSignal(ss)
		s.decide(128 + int(ss))
		stopSig = ss
	} else {
		s.decide(1)
	}
	tail := ""
	if already != "" {
		tail = "; " + already
	}
	switch {
	case already != "" && s.running == 0:
		s.out.Logf("%v: %s", sig, already)
	case s.alive() == 0:
		s.out.Logf("%v: %s%s", sig, s.stopWhat(), tail)
	default:
		s.out.Logf("%v: stopping %s (send it again to kill %s)%s", sig, s.ranks(), s.them(), tail)
	}
	s.stopWith(stopSig)
}

// signalLag bounds how long a cancelled context waits for the signal that
// cancelled it.
const signalLag = 20 * time.Millisecond

// cancelled stops the job when ctx ends. gorun's context ends on the same
// signals that Signals delivers, and the two arrive in either order: a stop
// on the context alone sent the ranks SIGTERM before the signal was seen,
// and the job exited with the first rank's 143 instead of the 130 of an
// interrupt (TestRig/sigint failed so once). The signal, if one comes
// within signalLag, decides the status.
func (s *supervisor) cancelled() {
	select {
	case sig := <-s.l.Signals:
		s.signal(sig)
	case <-time.After(signalLag):
		s.stop()
	}
}

// outputClosed stops the job when gorun's stdout or stderr is a pipe whose
// reader has gone (gorun ... | head): a SIGPIPE came, or a write failed
// with EPIPE. A gorun that died of it, as the default action has it, left
// the ranks to die of theirs, or to run on, and their files in /dev/shm;
// so the job stops as for a SIGTERM, with the status of a process killed
// by SIGPIPE, once: a SIGPIPE after the first (a write to the closed pipe
// that came before the stream kept its error) stops nothing more.
func (s *supervisor) outputClosed() {
	if s.piped {
		return
	}
	s.piped = true
	s.decide(128 + int(syscall.SIGPIPE))
	s.out.Logf("gorun's output is closed (SIGPIPE): %s", s.stopWhat())
	s.stopWith(syscall.SIGTERM)
}

// outputFailed stops the job when a write to gorun's stdout or stderr
// failed (err names the stream), as a Unix filter fails when its output
// does: the ranks' output is lost from then on, and a rank that writes
// without end (yes > /dev/full) ran for ever. One line says so, on stderr
// unless that is the stream that failed; the status is 1 unless the job's
// was decided already.
func (s *supervisor) outputFailed(err error) {
	if errors.Is(err, syscall.EPIPE) {
		s.outputClosed()
		return
	}
	s.decide(1)
	if s.stopping {
		s.out.Logf("%v", err)
		return
	}
	s.out.Logf("%v; %s", err, s.stopWhat())
	s.stop()
}
