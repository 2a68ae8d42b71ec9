package launch

// Which rank's failure ends the job: the first failure decides the job's
// status and stops the others, but a rank's exit with a failing status
// is held a moment first, for a rank killed by a signal, or a rank it
// reported lost (GORUN_STATUS_FD) that failed too: the likelier causes,
// whose peers fail after them and may be reaped first.

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
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

// pingWait bounds the hold while the agent of a host where a lost peer
// of the held rank runs has not answered a ping. A host cut off from the
// others, or whose agent is frozen, reports nothing: its ssh notices after
// its keepalives (sshAliveInterval times sshAliveCount), while the ranks
// of the healthy hosts see their peers there lost within seconds and
// exit 1, which named a healthy rank instead of the lost host. An agent
// that answers does so in milliseconds.
const pingWait = 3 * time.Second

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
	if e.status.StartErr != "" {
		// As a local start that fails: the job's status is the start's,
		// and no --max-restarts retries it (s.failed stays false).
		s.decide(e.status.Code)
		msg := ""
		if s.running > 0 {
			msg = "; stopping the other ranks"
		}
		s.out.Logf("%s%s", e.status.StartErr, msg)
		s.stop()
		return
	}
	if e.status.Signal == 0 && e.status.Lost == "" && !s.stopping {
		if s.held == nil {
			s.held, s.hold, s.heldAt = &e, time.After(holdFailure), time.Now()
			s.pingPeers()
		}
		return
	}
	if s.held != nil {
		s.logf("rank %d failed first (%v), but rank %d %v: naming %s", s.held.rank, s.held.status, e.rank, e.status, s.named(e))
		s.held, s.hold, s.pinged = nil, nil, nil
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
// losing a peer that still runs, for at most holdLost, or pingWait while
// the agent of the peer's host has not answered; one that has not by
// then is given up and named.
func (s *supervisor) holdOver() {
	if s.held == nil {
		return
	}
	if len(s.runningPeers()) > 0 {
		silent := s.silentPeers()
		if len(silent) > 0 && time.Since(s.pingedAt) >= s.pingWait() {
			s.unanswered(silent)
			return
		}
		if time.Since(s.heldAt) < holdLost || len(silent) > 0 {
			s.hold = time.After(holdFailure)
			return
		}
	}
	s.release()
}

// runningPeers returns the ranks the held rank reported lost that still
// run.
func (s *supervisor) runningPeers() []int {
	var peers []int
	for _, x := range s.held.status.LostPeers {
		if _, done := s.ends[x]; !done && x >= 0 && x < len(s.procs) && !slices.Contains(peers, x) {
			peers = append(peers, x)
		}
	}
	return peers
}

// pingPeers pings the agents of the hosts where the held rank's lost peers
// still run, other than the held rank's own.
func (s *supervisor) pingPeers() {
	if s.agents == nil {
		return
	}
	s.pinged = nil
	for _, x := range s.runningPeers() {
		if h := s.plan.Ranks[x].Host; h != s.plan.Ranks[s.held.rank].Host && !slices.Contains(s.pinged, h) {
			s.pinged = append(s.pinged, h)
		}
	}
	if len(s.pinged) > 0 {
		s.agents.ping(s.pinged)
		s.pingedAt = time.Now()
	}
}

// silentPeers returns the pinged hosts whose agents have not answered
// and where the held rank's lost peers still run.
func (s *supervisor) silentPeers() []string {
	if len(s.pinged) == 0 {
		return nil
	}
	var hosts []string
	for _, h := range s.agents.silent(s.pinged) {
		if len(s.peersOn(h)) > 0 {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// peersOn returns the held rank's lost peers that still run on host.
func (s *supervisor) peersOn(host string) []int {
	var peers []int
	for _, x := range s.runningPeers() {
		if s.plan.Ranks[x].Host == host {
			peers = append(peers, x)
		}
	}
	return peers
}

func (s *supervisor) pingWait() time.Duration {
	if s.l.pingWait > 0 {
		return s.l.pingWait
	}
	return pingWait
}

// unanswered decides the job by hosts whose agents did not answer within
// pingWait while the held rank's lost peers ran there: the hosts are
// given up and named, with status 255, instead of the rank that lost them.
func (s *supervisor) unanswered(hosts []string) {
	e := *s.held
	s.inHostOrder(hosts)
	var peers []int
	why := map[string]string{}
	wait, rp := s.pingWait(), s.plan.Ranks[e.rank]
	for _, h := range hosts {
		on := s.peersOn(h)
		peers = append(peers, on...)
		why[h] = fmt.Sprintf("no answer from its agent within %v after rank %d on %s lost %s there", wait, e.rank, rp.Host, contract.RankList(on))
	}
	slices.Sort(peers)
	s.held, s.hold, s.pinged = nil, nil, nil
	var g givenUp
	for _, h := range hosts {
		if given := s.agents.giveUp(h, why[h]); len(given) > 0 {
			g.hosts = append(g.hosts, h)
			g.with = append(g.with, given[1:]...)
		}
	}
	if len(g.hosts) == 0 { // lost meanwhile: their ranks' ends name them
		return
	}
	s.decide(exitLost)
	s.failed = true
	s.out.Logf("%s: no answer from %s within %v after rank %d (pid %d on %s) lost %s there and %v; giving %s up%s and stopping the job",
		hostNames(g.hosts), oneMany(len(g.hosts), "its agent", "their agents"), wait, e.rank, s.procs[e.rank].Pid(), rp.Host,
		contract.RankList(peers), e.status, g.them(), g.also())
	s.stop()
}

// release decides the job by the failure held, if any: by the rank it
// came from, or by a rank that rank reported lost which failed too
// (followed as far as it goes): that one failed first.
func (s *supervisor) release() {
	e := s.held
	if e == nil {
		return
	}
	s.held, s.hold, s.pinged = nil, nil, nil
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
