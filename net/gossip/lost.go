package gossip

import (
	"errors"
	"time"
)

// Reasons given to Config.OnLost.
const (
	reasonLeft   = "left: the rank closed its gossip node"
	reasonFailed = "failed: the rank stopped answering gossip probes (process dead or unreachable)"
)

// dispatch calls OnLost for every queued loss, outside every lock, until
// close. It tells a graceful leave from a failure by the leaving flag that
// Close gossips before memberlist's leave; a loss without that flag waits
// lossGrace for it before it is reported as a failure.
func (c *core) dispatch() {
	defer close(c.dispatched)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		var ready []lostEvent
		var reasons []string
		var next time.Duration
		now := time.Now()
		keep := c.lost[:0]
		for _, ev := range c.lost {
			switch {
			case c.leaving[ev.name]:
				ready, reasons = append(ready, ev), append(reasons, reasonLeft)
			case now.Sub(ev.at) >= lossGrace:
				ready, reasons = append(ready, ev), append(reasons, reasonFailed)
			default:
				keep = append(keep, ev)
				if d := lossGrace - now.Sub(ev.at); next == 0 || d < next {
					next = d
				}
			}
		}
		c.lost = keep
		c.mu.Unlock()

		for i, ev := range ready {
			if !c.call(ev.rank, reasons[i]) {
				return
			}
		}
		var tick <-chan time.Time
		if next > 0 {
			timer.Reset(next)
			tick = timer.C
		}
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-tick:
		}
	}
}

// call runs OnLost unless close has begun; it reports false then.
func (c *core) call(rank int, reason string) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.inCallback = true
	c.mu.Unlock()
	c.logf("gossip: %s: rank %d %s", c.name, rank, reason)
	if c.cfg.OnLost != nil {
		c.cfg.OnLost(rank, reason)
	}
	c.mu.Lock()
	c.inCallback = false
	c.mu.Unlock()
	return true
}

// close leaves gracefully (when graceful), stops memberlist and the OnLost
// goroutine, and waits for them. It does not wait for an OnLost call in
// progress, so that OnLost may itself call Close.
func (c *core) close(graceful bool) error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		busy := c.inCallback
		c.mu.Unlock()
		var errs []error
		if graceful {
			errs = append(errs, c.leave())
		}
		errs = append(errs, c.ml.Shutdown())
		close(c.done)
		if !busy {
			<-c.dispatched
		}
		c.closeErr = errors.Join(errs...)
		c.logf("gossip: %s closed", c.name)
	})
	return c.closeErr
}

// leave gossips the leaving flag, so that peers report "left" rather than
// "failed", then memberlist's leave message.
func (c *core) leave() error {
	if c.ml.NumMembers() > 1 {
		c.mu.Lock()
		meta, err := encodeMeta(c.self, flagLeaving)
		if err == nil {
			c.meta = meta
		}
		c.mu.Unlock()
		// A timeout here only makes peers say "failed" instead of "left".
		_ = c.ml.UpdateNode(leaveTimeout)
	}
	if err := c.ml.Leave(leaveTimeout); err != nil {
		c.logf("gossip: %s: leave: %v", c.name, err)
	}
	return nil
}
