package launch

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWatchdogCount: the silence counts from the last frame; a hold stops
// the count until the next frame; a long gap between checks (the agent
// itself stopped) starts it anew.
func TestWatchdogCount(t *testing.T) {
	var clock time.Duration
	w := &watchdog{now: func() time.Duration { return clock }}
	w.arm(6 * time.Second) // checks every second
	at := func(d time.Duration) time.Duration {
		clock = d
		return w.check()
	}
	for s := 1; s < 6; s++ {
		if got := at(time.Duration(s) * time.Second); got != 0 {
			t.Fatalf("at %ds: silent %v, want 0 before the limit", s, got)
		}
	}
	if got := at(6 * time.Second); got != 6*time.Second {
		t.Fatalf("at 6s: silent %v, want 6s", got)
	}

	w.heardFrame(frame{Type: frameAlive}) // at 6s
	for s := 7; s < 12; s++ {
		if got := at(time.Duration(s) * time.Second); got != 0 {
			t.Fatalf("at %ds, a keepalive at 6s: silent %v, want 0", s, got)
		}
	}
	if got := at(12 * time.Second); got != 6*time.Second {
		t.Fatalf("at 12s, a keepalive at 6s: silent %v, want 6s", got)
	}

	w.heardFrame(frame{Type: frameHold}) // at 12s: gorun stops (Ctrl-Z)
	for s := 13; s < 100; s++ {
		if got := at(time.Duration(s) * time.Second); got != 0 {
			t.Fatalf("at %ds, held at 12s: silent %v, want 0", s, got)
		}
	}
	clock = 100 * time.Second
	w.heardFrame(frame{Type: frameSignal}) // gorun continues: SIGCONT for a rank
	for s := 101; s < 106; s++ {
		at(time.Duration(s) * time.Second)
	}
	if got := at(106 * time.Second); got != 6*time.Second {
		t.Fatalf("at 106s, held at 12s, a frame at 100s: silent %v, want 6s", got)
	}

	// The agent itself stopped from 106s to 500s, with its parent: its
	// checks were far apart, so it counts anew.
	if got := at(500 * time.Second); got != 0 {
		t.Fatalf("at 500s, the last check at 106s: silent %v, want 0 (counted anew)", got)
	}
	for s := 501; s < 506; s++ {
		if got := at(time.Duration(s) * time.Second); got != 0 {
			t.Fatalf("at %ds, counting from 500s: silent %v, want 0", s, got)
		}
	}
	if got := at(506 * time.Second); got != 6*time.Second {
		t.Fatalf("at 506s, counting from 500s: silent %v, want 6s", got)
	}
}

// TestAgentWatchdog: an agent whose parent falls silent (a host cut off,
// a hung launcher) stops its ranks and exits after AgentTimeout; one that
// gets keepalives, or a hold, does not. Before, its ranks ran on for as
// long as the connection neither ended nor carried anything: for ever
// under sshd without ClientAlive.
func TestAgentWatchdog(t *testing.T) {
	const limit = time.Second // minAgentTimeout
	// start starts an agent with one rank; its frames come on the
	// channel, which closes when the agent's output ends.
	start := func(t *testing.T) (*agentPeer, <-chan frame) {
		p := startAgent(t)
		p.next(frameHello)
		p.send(jsonFrame(frameSetup, 1, 0, setupMsg{Name: "h1", Seed: "127.0.0.1", KillGrace: time.Second, AgentTimeout: limit}))
		p.next(frameReady)
		p.send(jsonFrame(frameStart, 1, 0, startMsg{Path: "/bin/sleep", Args: []string{"300"}}))
		p.next(frameStarted)
		got := make(chan frame)
		go func() {
			defer close(got)
			for {
				f, err := p.frame()
				if err != nil {
					return
				}
				got <- f
			}
		}()
		return p, got
	}
	// frames takes what the agent sends until it ends, or until the
	// guard passes (then the agent still runs).
	frames := func(got <-chan frame, guard time.Duration) (log string, exited []exitMsg, ended bool) {
		timer := time.NewTimer(guard)
		defer timer.Stop()
		for {
			select {
			case f, ok := <-got:
				if !ok {
					return log, exited, true
				}
				switch f.Type {
				case frameLog:
					log += string(f.Payload) + "\n"
				case frameExited:
					var e exitMsg
					f.decode(&e)
					exited = append(exited, e)
				}
			case <-timer.C:
				return log, exited, false
			}
		}
	}

	t.Run("silent parent", func(t *testing.T) {
		p, got := start(t)
		log, exited, ended := frames(got, 30*time.Second) // a guard against a hang, not a timing
		if !ended {
			t.Fatalf("the agent still runs 30s after its last frame, with --agent-timeout %v; log:\n%s", limit, log)
		}
		if code := <-p.done; code != 1 {
			t.Errorf("RunAgent = %d, want 1", code)
		}
		if len(exited) != 1 || exited[0].Signal != int(syscall.SIGTERM) {
			t.Errorf("ranks exited %+v, want one, by SIGTERM", exited)
		}
		if want := "heard nothing from gorun for "; !strings.Contains(log, want) || !strings.Contains(log, "stopping the ranks of host h1") {
			t.Errorf("log lacks %q...:\n%s", want, log)
		}
	})

	t.Run("keepalives", func(t *testing.T) {
		p, got := start(t)
		stop := make(chan struct{})
		go func() {
			tick := time.NewTicker(limit / aliveBeats)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					p.w.Write(appendFrame(nil, frame{Type: frameAlive, Host: 1}))
				}
			}
		}()
		log, exited, ended := frames(got, 3*limit)
		close(stop)
		if ended || len(exited) > 0 {
			t.Fatalf("with keepalives: agent ended %v, ranks exited %+v; log:\n%s", ended, exited, log)
		}
	})

	t.Run("hold", func(t *testing.T) {
		p, got := start(t)
		p.send(frame{Type: frameHold, Host: 1})
		log, exited, ended := frames(got, 3*limit)
		if ended || len(exited) > 0 {
			t.Fatalf("held: agent ended %v, ranks exited %+v; log:\n%s", ended, exited, log)
		}
		// The next frame ends the hold: silent again, the agent stops.
		p.send(frame{Type: frameAlive, Host: 1})
		if _, exited, ended := frames(got, 30*time.Second); !ended || len(exited) != 1 {
			t.Fatalf("silent after a hold: agent ended %v, ranks exited %+v", ended, exited)
		}
	})
}
