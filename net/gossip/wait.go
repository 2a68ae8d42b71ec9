package gossip

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// MissingError is the error of a Join or Wait whose ctx ended before every
// rank arrived. It matches ErrTimeout with errors.Is, and ErrNoSeed when no
// seed ever accepted this node. Every rank of a job computes the same
// Missing list, so that all of them name the same culprits.
type MissingError struct {
	Missing []int         // ranks that never arrived, ascending
	Size    int           // ranks in the job
	Waited  time.Duration // how long the caller waited
	Err     error         // ctx.Err()
	JoinErr error         // why no seed accepted us, or nil
}

func (e *MissingError) Error() string {
	s := fmt.Sprintf("%s of %d never arrived within %v", contract.RankList(e.Missing), e.Size, e.Waited)
	if e.JoinErr != nil {
		s += fmt.Sprintf("; %v", e.JoinErr)
	}
	return s
}

// Is makes errors.Is(err, ErrTimeout) hold.
func (e *MissingError) Is(target error) bool { return target == ErrTimeout }

// Unwrap returns the context's error and the join error.
func (e *MissingError) Unwrap() []error { return []error{e.Err, e.JoinErr} }

// await waits until ranks 0..size-1 have all been seen and returns them;
// a rank that arrived and is gone again counts as arrived (and is reported
// through OnLost once armed), so that one that finished early does not make
// the others time out. A rank
// (pull) first joins cfg.Seeds, retrying until one answers, then pulls the
// state of a seed or a known peer now and then until the table is complete,
// in case some gossip went astray or the seed is gone. With arm, OnLost
// reporting starts at the moment the table is complete.
func (c *core) await(ctx context.Context, size int, pull, arm bool) ([]Member, error) {
	start := time.Now()
	seeds := c.cfg.Seeds
	joined := !pull || len(seeds) == 0
	var joinErr error
	delay := time.Duration(0)
	retry := time.NewTimer(delay)
	defer retry.Stop()
	for {
		c.mu.Lock()
		if len(c.dups) > 0 {
			err := errors.Join(c.dups...)
			c.mu.Unlock()
			return nil, err
		}
		missing := c.missingLocked(size)
		if len(missing) == 0 && (joined || c.others > 0) {
			if arm {
				c.armLocked()
			}
			ms := c.membersLocked(c.seen, size)
			c.mu.Unlock()
			c.logf("gossip: %s: all %d ranks known after %v", c.name, size, time.Since(start))
			return ms, nil
		}
		changed := c.changed
		c.mu.Unlock()

		select {
		case <-changed:
		case <-retry.C:
			if !joined {
				if _, err := c.ml.Join(seeds); err != nil {
					joinErr = err
				} else {
					joined, joinErr, delay = true, nil, 0
					c.logf("gossip: %s joined %s", c.name, strings.Join(seeds, ","))
				}
			} else if pull {
				c.pull()
			}
			// Jittered, and slower on a crowded host: every waiting
			// rank pulls, half of the time from the seed.
			delay = min(max(2*delay, retryMin), crowded(c.cfg, retryMax))
			delay = delay/2 + rand.N(delay/2+1)
			retry.Reset(delay)
		case <-ctx.Done():
			return nil, c.missingErr(ctx, size, start, joined, joinErr)
		case <-c.done:
			return nil, ErrClosed
		}
	}
}

func (c *core) missingErr(ctx context.Context, size int, start time.Time, joined bool, joinErr error) error {
	waited := time.Since(start)
	if dl, ok := ctx.Deadline(); ok && dl.After(start) {
		waited = dl.Sub(start)
	}
	if waited >= 500*time.Millisecond {
		waited = waited.Round(100 * time.Millisecond)
	}
	c.mu.Lock()
	e := &MissingError{Missing: c.missingLocked(size), Size: size, Waited: waited.Round(time.Millisecond), Err: ctx.Err()}
	c.mu.Unlock()
	if !joined {
		e.JoinErr = fmt.Errorf("%w %s (last error: %v): check that the launcher is up and that this process has the job's id and secret",
			ErrNoSeed, strings.Join(c.cfg.Seeds, ","), joinErr)
	}
	c.logf("gossip: %s: %v", c.name, e)
	return e
}

// pull exchanges state with one seed or one known peer. Failures are
// normal (a seed may be gone) and only logged.
func (c *core) pull() {
	var target string
	c.mu.Lock()
	if len(c.cfg.Seeds) > 0 && rand.IntN(2) == 0 || len(c.table) <= 1 {
		if len(c.cfg.Seeds) > 0 {
			target = c.cfg.Seeds[rand.IntN(len(c.cfg.Seeds))]
		}
	} else {
		var peers []string
		for _, p := range c.table {
			if p.name != c.name { // the table is alive ranks
				peers = append(peers, p.gossip)
			}
		}
		if len(peers) > 0 {
			target = peers[rand.IntN(len(peers))]
		}
	}
	c.mu.Unlock()
	if target == "" {
		return
	}
	if _, err := c.ml.Join([]string{target}); err != nil {
		c.logf("gossip: %s: pull from %s: %v", c.name, target, err)
	}
}
