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
	"syscall"
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

// holdSignal is how long a rank killed by SIGTERM, SIGINT or SIGHUP that
// gorun did not send is held before it is named: those are what a job's
// manager sends to the whole job at once (Slurm's scancel and time limit
// signal every step of the job, gorun's and its agents'; systemd stops a
// unit's whole cgroup), and gorun, which gets one too, may get its own
// after ranks died of theirs and were reaped: on the Slurm rig the
// ranks' SIGTERM came 12-32 ms before gorun's, and 3 scancels of 5 named
// a rank as the job's failure.
const holdSignal = time.Second

// stopSignal reports whether sig is one that stops a whole job: SIGTERM,
// SIGINT or SIGHUP, which gorun passes on to its ranks when it gets one.
func stopSignal(sig syscall.Signal) bool {
	return sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGHUP
}

// pingWait bounds the hold while the agent of a host where a lost peer
// of the held rank runs has sent nothing since it was pinged. A host cut
// off from the others, or whose agent is frozen, reports nothing: its ssh
// notices after its keepalives (sshAliveInterval times sshAliveCount),
// while the ranks of the healthy hosts see their peers there lost within
// seconds and exit 1, which named a healthy rank instead of the lost
// host. A quiet agent answers in milliseconds (under 0.1 s through ssh on
// the 2-core VM with a load of 12-16, race-built); a busy one's pong
// waits behind its ranks' output (1.8 s with a rank that printed all it
// could), but that output says it is there: any frame of the agent's
// counts (cluster.unheard). The time that gorun spends writing frames
// that came before, to a stdout that does not take them, does not count
// towards pingWait either: it reads nothing from the agent meanwhile.
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
	if stopSignal(e.status.Signal) && e.status.Lost == "" && !s.stopping {
		s.holdStop(e)
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

// holdStop holds e, a rank killed by a stop signal that gorun did not
// send, for holdSignal, in case gorun gets it too (the whole job was
// signalled): a failure with an exit status held already is the likelier
// consequence, and a rank killed so held already came first.
func (s *supervisor) holdStop(e ended) {
	if s.held != nil && stopSignal(s.held.status.Signal) {
		return
	}
	wait := s.holdSignal()
	if s.held != nil {
		s.logf("rank %d failed first (%v), but rank %d %v: holding that instead", s.held.rank, s.held.status, e.rank, e.status)
	}
	s.logf("rank %d %v, which gorun did not send: holding it up to %v, in case gorun gets it too (sent to the whole job)", e.rank, e.status, wait)
	s.held, s.hold, s.heldAt, s.pinged = &e, time.After(wait), time.Now(), nil
}

// heldStop reports whether the failure held is a rank killed by a stop
// signal.
func (s *supervisor) heldStop() bool {
	return s.held != nil && stopSignal(s.held.status.Signal)
}

// waitSignal reports whether the job, its ranks ended, still waits for
// gorun's own stop signal: a rank killed by one is held, and not every
// rank was (the others failed after losing it, say), which alone would
// say that the job was signalled as a whole.
func (s *supervisor) waitSignal() bool {
	return s.heldStop() && !s.wholeJob(s.held.status.Signal)
}

func (s *supervisor) holdSignal() time.Duration {
	if s.l.holdSignal > 0 {
		return s.l.holdSignal
	}
	return holdSignal
}

// killedBy lists the ranks that ended killed by sig.
func (s *supervisor) killedBy(sig syscall.Signal) []int {
	var rs []int
	for r, st := range s.ends {
		if st.Signal == sig && st.Lost == "" {
			rs = append(rs, r)
		}
	}
	slices.Sort(rs)
	return rs
}

// sameSignal ends the hold of a rank killed by sig, which gorun got too:
// the job was signalled as a whole, and no rank failed. It returns what
// the signal's line adds, or "" where no such rank is held.
func (s *supervisor) sameSignal(sig syscall.Signal) string {
	if !s.heldStop() || s.held.status.Signal != sig {
		return ""
	}
	s.held, s.hold, s.pinged = nil, nil, nil
	ranks := s.killedBy(sig)
	return fmt.Sprintf("%s had already been killed by it: %s", contract.RankList(ranks), sentToJob)
}

// sentToJob ends the line of a job whose ranks a stop signal killed that
// gorun did not send.
const sentToJob = "it was sent to the whole job (as Slurm's scancel and time limit do), not by gorun"

// wholeJob reports whether every rank of the job, two or more, ended
// killed by sig, which gorun did not send: the job was signalled as a
// whole (scancel --signal signals every step but gorun's), and no rank
// failed first.
func (s *supervisor) wholeJob(sig syscall.Signal) bool {
	n := len(s.plan.Ranks)
	return n > 1 && s.running == 0 && len(s.procs) == n && len(s.killedBy(sig)) == n
}

// named is what the job's line names for e: its rank, or its lost host.
func (s *supervisor) named(e ended) string {
	if e.status.Lost != "" {
		return "host " + cmp.Or(e.status.LostHost, s.plan.Ranks[e.rank].Host)
	}
	return "rank " + itoa(e.rank)
}

// holdOver ends the hold of a failure, unless the held rank reported
// losing a peer that still runs, for at most holdLost, or while the agent
// of the peer's host has sent nothing since it was pinged; one that has
// sent nothing for pingWait is given up and named.
func (s *supervisor) holdOver() {
	if s.held == nil {
		return
	}
	if len(s.runningPeers()) > 0 {
		unheard, late := s.unheardPeers()
		if len(late) > 0 {
			s.unanswered(late)
			return
		}
		if time.Since(s.heldAt) < holdLost || len(unheard) > 0 {
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
	}
}

// unheardPeers returns the pinged hosts whose agents have sent nothing
// since, where the held rank's lost peers still run; late, those of them
// whose agents have sent nothing for pingWait.
func (s *supervisor) unheardPeers() (unheard, late []string) {
	if len(s.pinged) == 0 {
		return nil, nil
	}
	hosts, over := s.agents.unheard(s.pinged, s.pingWait())
	for _, h := range hosts {
		if len(s.peersOn(h)) > 0 {
			unheard = append(unheard, h)
			if slices.Contains(over, h) {
				late = append(late, h)
			}
		}
	}
	return unheard, late
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

// unanswered decides the job by hosts whose agents sent nothing for
// pingWait after they were pinged while the held rank's lost peers ran
// there: the hosts are given up and named, with status 255, instead of
// the rank that lost them.
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
	if sig := e.status.Signal; stopSignal(sig) && s.wholeJob(sig) {
		s.decide(128 + int(sig))
		s.out.Logf("every rank (%s) was killed by signal %d (%v), which gorun did not send: %s",
			contract.RankList(s.killedBy(sig)), int(sig), sig, sentToJob)
		return
	}
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
