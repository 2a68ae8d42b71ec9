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
	"sync/atomic"
	"time"
)

// aliveBeats is how many keepalives a parent sends per AgentTimeout: an
// agent gives up only after this many in a row went missing.
const aliveBeats = 6

// minAgentTimeout bounds --agent-timeout below: shorter, a busy machine's
// scheduling delays would stop healthy jobs.
const minAgentTimeout = time.Second

// keepalive sends a frameAlive to each child every interval until stop
// closes.
func (s *spawner) keepalive(interval time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		links := s.links
		s.mu.Unlock()
		for _, l := range links {
			l.send(frame{Type: frameAlive, Host: l.t.Index})
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
