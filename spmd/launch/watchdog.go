package launch

// Keepalives and the agent's watchdog. A host that is cut off, or whose
// launcher's machine hangs, leaves its agent waiting on a connection that
// neither ends nor carries anything: sshd, without ClientAlive, never
// notices, and the ranks there ran on after gorun had given the host up.
// So every parent in the spawn tree (gorun, and each agent for the agents
// it started) sends each child a frameAlive every AgentTimeout/aliveBeats,
// and an agent that hears nothing from its parent for AgentTimeout stops
// its ranks and exits, as when its input ends.
//
// Two stops are not silences. Ctrl-Z stops gorun, which first sends
// frameHold: the agent waits without a limit until the next frame (the
// ranks are stopped too). And a job suspended whole (Slurm's scontrol
// suspend stops every process, the agents among them) must not find its
// limit passed when it continues: an agent that finds its own checks far
// apart was stopped itself, and counts its silence anew.

import (
	"fmt"
	"sync/atomic"
	"time"
)

// aliveBeats is how many keepalives a parent sends per AgentTimeout: an
// agent gives up only after this many in a row went missing.
const aliveBeats = 6

// minAgentTimeout bounds --agent-timeout below: shorter, a busy machine's
// scheduling delays would stop healthy jobs.
const minAgentTimeout = time.Second

// monoBase is where mono counts from.
var monoBase = time.Now()

// mono is a monotonic clock: the time since this process started, near
// enough.
func mono() time.Duration { return time.Since(monoBase) }

// keepalive sends a frameAlive to each child aliveBeats times per limit
// until stop closes, and gives up a child that has said nothing for limit
// since its hello: the host cut off (where ssh has no keepalives, or
// another launch agent carries the link), or its agent frozen. Gaps in its
// own ticks (this process stopped: Ctrl-Z, a suspended job) restart every
// child's count.
func (s *spawner) keepalive(limit time.Duration, stop <-chan struct{}) {
	interval := limit / aliveBeats
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := mono()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := mono()
		stalled := now-last > 2*interval
		last = now
		s.mu.Lock()
		links := s.links
		s.mu.Unlock()
		for _, l := range links {
			l.send(frame{Type: frameAlive, Host: l.t.Index})
			heard := l.heard.Load()
			switch {
			case heard == 0 || l.busy.Load(): // no hello yet, or the reader is busy
			case stalled:
				l.heard.CompareAndSwap(heard, int64(now))
			case now-time.Duration(heard) >= limit:
				silent := (now - time.Duration(heard)).Round(time.Second / 10)
				if l.setFatal(fmt.Sprintf("its agent silent for %v, past --agent-timeout %v: the host cut off, or its agent frozen", silent, limit)) {
					s.logf("host %s: nothing from its agent for %v: giving it up", l.t.Name, silent)
					l.kill()
				}
			}
		}
	}
}

// watchdog is an agent's count of its parent's silence. heard is written
// by the agent's reader goroutine; the rest by RunAgent's loop.
type watchdog struct {
	limit time.Duration        // AgentTimeout; 0: no watchdog
	now   func() time.Duration // the monotonic time since the agent started
	heard atomic.Int64         // when the last frame came from the parent
	held  atomic.Bool          // frameHold came, and no frame since
	last  time.Duration        // when check last ran
}

func newWatchdog() *watchdog {
	t0 := time.Now()
	return &watchdog{now: func() time.Duration { return time.Since(t0) }}
}

// arm starts counting, limit from now.
func (w *watchdog) arm(limit time.Duration) {
	w.limit, w.last = limit, w.now()
	w.heard.Store(int64(w.last))
}

// heardFrame notes a frame from the parent: a hold holds the count, any
// other frame ends the hold.
func (w *watchdog) heardFrame(f frame) {
	w.heard.Store(int64(w.now()))
	w.held.Store(f.Type == frameHold)
}

// interval is how often check should run; 0: never.
func (w *watchdog) interval() time.Duration { return w.limit / aliveBeats }

// check reports how long the parent has been silent when that is past the
// limit; 0 while it is not, or while the launcher holds.
func (w *watchdog) check() time.Duration {
	now := w.now()
	gap := now - w.last
	w.last = now
	if w.limit <= 0 || w.held.Load() {
		return 0
	}
	if gap > 2*w.interval() {
		// This agent was stopped, or not scheduled, for a while: its
		// parent may have been too, and its frames may be waiting to
		// be read. Count anew from now.
		w.heard.Store(int64(now))
		return 0
	}
	if silent := now - time.Duration(w.heard.Load()); silent >= w.limit {
		return silent
	}
	return 0
}

func (c *cluster) hold() { c.sp.hold(holdFlush) }

// holdFlush bounds how long gorun, stopping itself, waits for its frames
// to be written to the agents' connections.
const holdFlush = time.Second

// hold sends each child a frameHold, then waits up to wait until every
// link has written what was queued.
func (s *spawner) hold(wait time.Duration) {
	s.mu.Lock()
	links := s.links
	s.mu.Unlock()
	for _, l := range links {
		l.send(frame{Type: frameHold, Host: l.t.Index})
	}
	deadline := time.After(wait)
	for _, l := range links {
		select {
		case <-l.out.flushed():
		case <-deadline:
			return
		}
	}
}
