package launch

// Which rank's failure ends the job: the first failure decides the job's
// status and stops the others, but a rank's exit with a failing status
// is held a moment first, for a rank killed by a signal, or a rank it
// reported lost (GORUN_STATUS_FD) that failed too: the likelier causes,
// whose peers fail after them and may be reaped first.

import (
	"cmp"
	"fmt"
	"time"
)

// holdFailure is how long a rank's exit with a failing status waits for
// a rank killed by a signal (SIGKILL, SIGSEGV, the OOM killer) to be
// reaped, so that gorun names the killed rank: its peers see it lost
// within milliseconds and exit 1, and one of them was reaped first in
// examples/ddp's TestRankKilled on a busy machine.
const holdFailure = 100 * time.Millisecond

// holdLost bounds the hold while the held rank reported losing a peer
// (GORUN_STATUS_FD) that is still running: the peer that failed first may
// take a moment after it closed its transport to exit.
const holdLost = time.Second

// ended handles the end of one rank; the first failure stops the job,
// one with an exit status after holdFailure unless a rank killed by a
// signal comes first.
func (s *supervisor) ended(e ended) {
	rp := s.plan.Ranks[e.rank]
	s.logf("rank %d (pid %d on %s) %v", e.rank, s.procs[e.rank].Pid(), rp.Host, e.status)
	if s.ends == nil {
		s.ends = map[int]status{}
	}
	s.ends[e.rank] = e.status
	if e.status.Success() || s.decided {
		return
	}
	if e.status.Signal == 0 && e.status.Lost == "" && !s.stopping {
		if s.held == nil {
			s.held, s.hold, s.heldAt = &e, time.After(holdFailure), time.Now()
		}
		return
	}
	if s.held != nil {
		s.logf("rank %d failed first (%v), but rank %d %v: naming %s", s.held.rank, s.held.status, e.rank, e.status, s.named(e))
		s.held, s.hold = nil, nil
	}
	s.fail(e, "")
}

// named is what the job's line names for e: its rank, or its lost host.
func (s *supervisor) named(e ended) string {
	if e.status.Lost != "" {
		return "host " + cmp.Or(e.status.LostHost, s.plan.Ranks[e.rank].Host)
	}
	return "rank " + itoa(e.rank)
}

// holdOver ends the hold of a failure, unless the held rank reported
// losing a peer that still runs, for at most holdLost.
func (s *supervisor) holdOver() {
	if s.held == nil {
		return
	}
	if time.Since(s.heldAt) < holdLost {
		for _, x := range s.held.status.LostPeers {
			if _, done := s.ends[x]; !done && x >= 0 && x < len(s.procs) {
				s.hold = time.After(holdFailure)
				return
			}
		}
	}
	s.release()
}

// release decides the job by the failure held, if any: by the rank it
// came from, or by a rank that rank reported lost which failed too
// (followed as far as it goes): that one failed first.
func (s *supervisor) release() {
	e := s.held
	if e == nil {
		return
	}
	s.held, s.hold = nil, nil
	cause := *e
	seen := map[int]bool{cause.rank: true}
next:
	for {
		for _, x := range cause.status.LostPeers {
			if st, ok := s.ends[x]; ok && !seen[x] && !st.Success() {
				seen[x] = true
				cause = ended{x, st}
				continue next
			}
		}
		break
	}
	if cause.rank != e.rank {
		s.logf("rank %d failed after losing rank %d, which failed too: naming rank %d", e.rank, cause.rank, cause.rank)
	}
	s.fail(cause, s.leftEarly(cause))
}

// leftEarly says which rank that e reported lost had exited with status
// 0, for the line that names e: a rank that returns (or calls os.Exit(0))
// while its peers still wait on it fails them, and is the likelier cause,
// as Open MPI's "exiting improperly" says.
func (s *supervisor) leftEarly(e ended) string {
	for _, x := range e.status.LostPeers {
		if st, ok := s.ends[x]; ok && st.Success() {
			return fmt.Sprintf(", after losing rank %d (pid %d on %s), which had exited with status 0 while the others still used it",
				x, s.procs[x].Pid(), s.plan.Ranks[x].Host)
		}
	}
	return ""
}

// fail decides the job by rank e's failure and stops the others; note
// follows what it says of the rank.
func (s *supervisor) fail(e ended, note string) {
	rp := s.plan.Ranks[e.rank]
	s.decide(e.status.ExitCode())
	s.failed = true
	if e.status.Lost != "" {
		s.out.Logf("%s: %s; stopping the job", s.named(e), e.status.Lost)
		s.stop()
		return
	}
	msg := ""
	if s.running > 0 {
		msg = "; stopping the other ranks"
	}
	s.out.Logf("rank %d (pid %d on %s) %v%s%s", e.rank, s.procs[e.rank].Pid(), rp.Host, e.status, note, msg)
	s.stop()
}
