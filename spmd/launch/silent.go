package launch

// Hosts whose agents fall silent. An agent that is frozen (SIGSTOP, a
// hung machine) or whose host is cut off from this one passes on no
// signal and reports no exit, and its ssh notices only when its
// keepalives go unanswered (sshAliveInterval), or never without them.
// So, where a host's silence would hold the job up or blame another
// host's rank, the supervisor asks the agent (framePing, answered after
// the frames before it) and gives up a host whose agent does not answer:
// its ranks end lost, its ssh is killed, and gorun exits.

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// killAnswer is how long the ranks on other hosts get to end after SIGKILL
// was sent to them before their hosts are given up. A host's agent that
// answers reports its ranks' ends at once, or after drainTimeout for
// output still held by a process that left a rank's group: killAnswer is
// more than that.
const killAnswer = 5 * time.Second

// hostAgents is what the supervisor asks of a starter whose ranks run on
// other hosts through agents (the cluster). Hosts are named as in the
// plan; hosts it does not reach through an agent (this machine) are
// ignored.
type hostAgents interface {
	// ping asks the agents of hosts to answer.
	ping(hosts []string)
	// silent returns those of hosts whose agents have not answered the
	// last ping sent to them, and are not lost.
	silent(hosts []string) []string
	// unheard returns those of hosts whose agents have sent nothing
	// since the last ping sent to them, neither its pong nor any other
	// frame, and are not lost; late, those of them that have sent
	// nothing for wait of the time that this process was reading their
	// links.
	unheard(hosts []string, wait time.Duration) (unheard, late []string)
	// giveUp marks host lost, why, with the hosts the spawn tree
	// reaches through its agent, and drops its agent's connection; the
	// ranks running there end with a Lost status. It returns the hosts
	// it marked, host first; none where host was lost already or is not
	// reached through an agent.
	giveUp(host, why string) []string
	// hold tells the agents that gorun stops (Ctrl-Z), so that their
	// watchdogs wait for it, and returns once what was sent to them
	// (the ranks' SIGSTOPs) is written, or after holdFlush.
	hold()
}

var _ hostAgents = (*cluster)(nil)

// ping sends a ping to the agents of hosts.
func (c *cluster) ping(hosts []string) {
	for _, name := range hosts {
		c.mu.Lock()
		h := c.byName[name]
		if h == nil || h.lost != "" {
			c.mu.Unlock()
			continue
		}
		h.pings++
		n := h.pings
		h.pingAt = c.now()
		if r := c.links[h.t.Index]; r != nil {
			h.deafAt = r.deaf(h.pingAt)
		}
		c.mu.Unlock()
		c.send(u32Frame(framePing, h.t.Index, 0, n))
	}
}

// pong notes an agent's answer to a ping.
func (c *cluster) pong(h *remoteHost, f frame) {
	n, err := f.u32()
	if err != nil {
		c.out.Logf("host %s: %v", h.t.Name, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > h.pong && n <= h.pings {
		h.pong = n
	}
}

func (c *cluster) silent(hosts []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range hosts {
		if h := c.byName[name]; h != nil && h.lost == "" && h.pong < h.pings {
			out = append(out, name)
		}
	}
	return out
}

func (c *cluster) unheard(hosts []string, wait time.Duration) (unheard, late []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, name := range hosts {
		h := c.byName[name]
		if h == nil || h.lost != "" || h.pong >= h.pings || h.heard >= h.pings {
			continue
		}
		unheard = append(unheard, name)
		read := now.Sub(h.pingAt)
		if r := c.links[h.t.Index]; r != nil {
			read -= r.deaf(now) - h.deafAt
		}
		if read >= wait {
			late = append(late, name)
		}
	}
	return unheard, late
}

// reading is how this process reads the frames that come up one link
// to an agent: one at a time, each handed on before the next is read. So
// while it hands one on (a rank's output, to a stdout that does not take
// it) it hears nothing more from the agents behind that link, and their
// silence then is not theirs. Its fields are guarded by cluster.mu.
type reading struct {
	busy  int           // frames being handed on
	since time.Time     // when busy last became nonzero
	spent time.Duration // the time busy before since
}

// deaf returns how long, until now, frames of the link were being
// handed on: the time nothing more was read from it.
func (r *reading) deaf(now time.Time) time.Duration {
	if r.busy > 0 {
		return r.spent + now.Sub(r.since)
	}
	return r.spent
}

// readLocked notes that a frame of h's agent was read, and is being
// handed on until handled: the agent was there after the pings sent to it
// before. c.mu must be held.
func (c *cluster) readLocked(h *remoteHost) {
	h.heard = h.pings
	if r := c.links[h.t.Index]; r != nil {
		if r.busy == 0 {
			r.since = c.now()
		}
		r.busy++
	}
}

// handled notes that a frame of host's agent has been handed on.
func (c *cluster) handled(host int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.links[host]; r != nil && r.busy > 0 {
		if r.busy--; r.busy == 0 {
			r.spent += c.now().Sub(r.since)
		}
	}
}

// giveUp gives host up. Where this process started the host's agent, its
// ssh is killed; an agent reached through another is dropped by that one
// when the launcher's connection ends, at the job's end.
func (c *cluster) giveUp(host, why string) []string {
	c.mu.Lock()
	h := c.byName[host]
	if h == nil || h.lost != "" {
		c.mu.Unlock()
		return nil
	}
	st, ended, with := c.markLocked(h, why, why)
	c.mu.Unlock()
	for _, p := range ended {
		p.end(st)
	}
	c.sp.kill(h.t.Index)
	return append([]string{host}, with...)
}

// kill kills the ssh of host's agent if this spawner started it.
func (s *spawner) kill(host int) {
	s.mu.Lock()
	l := s.route[host]
	s.mu.Unlock()
	if l != nil && l.t.Index == host {
		l.kill()
	}
}

// kill sends SIGKILL to every rank; the first time, it pings the agents of
// the hosts where ranks still run and arms killAnswer, after which those
// hosts are given up (answerOver).
func (s *supervisor) kill() {
	s.signalAll(syscall.SIGKILL)
	if s.agents == nil || !s.killedAt.IsZero() {
		return
	}
	s.killedAt = time.Now()
	s.agents.ping(s.runningHosts())
	s.answer = time.After(s.killAnswer())
}

func (s *supervisor) killAnswer() time.Duration {
	if s.l.killAnswer > 0 {
		return s.l.killAnswer
	}
	return killAnswer
}

// answerOver gives up the hosts where ranks still run killAnswer after
// SIGKILL was sent: their ranks end lost, and gorun exits, with status 255
// unless the job's status was decided. One line names them.
func (s *supervisor) answerOver() {
	s.answer = nil
	hosts := s.runningHosts()
	silent := s.agents.silent(hosts)
	wait := s.killAnswer()
	var mute, busy givenUp // agents that did not answer; that did
	for _, h := range hosts {
		g, why := &mute, fmt.Sprintf("no answer from its agent %v after SIGKILL was sent", wait)
		if !slices.Contains(silent, h) {
			g, why = &busy, fmt.Sprintf("ranks still ran %v after SIGKILL was sent, though its agent answered", wait)
		}
		given := s.agents.giveUp(h, why)
		if len(given) == 0 {
			continue
		}
		g.hosts = append(g.hosts, h)
		g.with = append(g.with, given[1:]...)
		for _, x := range given { // their ends are not read yet
			g.ranks = append(g.ranks, s.runningOn(x)...)
		}
	}
	if len(mute.hosts)+len(busy.hosts) == 0 {
		return
	}
	s.decide(exitLost)
	if len(mute.hosts) > 0 {
		slices.Sort(mute.ranks)
		s.out.Logf("%s: no answer from %s %v after SIGKILL was sent; giving %s up%s (%s may still run there)",
			hostNames(mute.hosts), oneMany(len(mute.hosts), "its agent", "their agents"), wait, mute.them(), mute.also(), contract.RankList(mute.ranks))
	}
	if len(busy.hosts) > 0 {
		s.out.Logf("%s: ranks still ran %v after SIGKILL was sent, though %s answered; giving %s up%s",
			hostNames(busy.hosts), wait, oneMany(len(busy.hosts), "its agent", "their agents"), busy.them(), busy.also())
	}
}

// givenUp is what answerOver gave up alike: hosts, the hosts reached
// through them, and the ranks left running there.
type givenUp struct {
	hosts, with []string
	ranks       []int
}

func (g *givenUp) them() string { return oneMany(len(g.hosts), "it", "them") }

// also names the hosts given up with g's: ", with host h2, reached
// through it".
func (g *givenUp) also() string {
	if len(g.with) == 0 {
		return ""
	}
	return ", with " + hostNames(g.with) + ", reached through " + g.them()
}

// runningHosts returns the hosts of the ranks still running, in the
// job's order of hosts.
func (s *supervisor) runningHosts() []string {
	var hosts []string
	for r := range s.procs {
		if _, done := s.ends[r]; !done && !slices.Contains(hosts, s.plan.Ranks[r].Host) {
			hosts = append(hosts, s.plan.Ranks[r].Host)
		}
	}
	s.inHostOrder(hosts)
	return hosts
}

// inHostOrder sorts hosts in the job's order of hosts, in which the spawn
// tree puts an agent's host before the hosts it reaches: giving up an
// agent's host first gives up those with it.
func (s *supervisor) inHostOrder(hosts []string) {
	slices.SortStableFunc(hosts, func(a, b string) int {
		return slices.Index(s.plan.Hosts, a) - slices.Index(s.plan.Hosts, b)
	})
}

// runningOn returns the ranks still running on host.
func (s *supervisor) runningOn(host string) []int {
	var ranks []int
	for r := range s.procs {
		if _, done := s.ends[r]; !done && s.plan.Ranks[r].Host == host {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// hostNames names hosts for a message: "host h3", "hosts h2, h3".
func hostNames(hosts []string) string {
	if len(hosts) == 1 {
		return "host " + hosts[0]
	}
	return "hosts " + strings.Join(hosts, ", ")
}

// oneMany is one for a single thing, many for several.
func oneMany(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
