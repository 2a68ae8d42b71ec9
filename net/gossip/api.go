package gossip

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
)

// Config configures one gossip node: the launcher's seed or a rank.
// The zero value is not usable: JobID and Secret are required.
type Config struct {
	JobID    string      // memberlist Label: nodes of other jobs are refused
	Secret   []byte      // per-job secret; the memberlist key is HMAC-SHA256(secret, "gorun gossip key")
	BindAddr string      // IP to bind; "" means 127.0.0.1
	BindPort int         // 0 = any free port
	Seeds    []string    // "host:port" addresses to join (empty for the seed itself)
	Logger   *log.Logger // nil = silent; when set, log join/leave/convergence steps
	// OnLost is called once per rank that left or failed: by a Node after
	// Join returned, by a Seed from OpenSeed on. It runs on a goroutine the
	// Node or Seed owns (never under a memberlist lock), one call at a time.
	// reason starts with "left" for a graceful leave (Close) and "failed"
	// otherwise.
	OnLost func(rank int, reason string)
	// Crowd is how many ranks share each core of this host (1 or more; 0
	// counts as 1). Gossip and probes slow down in proportion, up to
	// maxCrowd: 256 ranks on 2 cores each gossiping every 10 ms sent
	// 100,000 packets a second among themselves and never converged.
	Crowd int
}

// Member is what a node tells the job about itself; it travels in the
// memberlist node metadata.
type Member struct {
	Rank     int    // -1 for the launcher's seed
	HostID   string // host identity (topo groups ranks by it)
	Hostname string
	Addr     string // the rank's data-plane address "ip:port"
	Pid      int
}

// SeedRank is the rank of the launcher's seed node.
const SeedRank = -1

var (
	// ErrTimeout is matched (errors.Is) by the *MissingError that Join and
	// Wait return when ctx ends before every rank arrived; its message names
	// the missing ranks.
	ErrTimeout = errors.New("gossip: timed out waiting for ranks")
	// ErrNoSeed is matched by a *MissingError when no seed ever accepted
	// this node: none was up, or each refused it (another job id or secret).
	ErrNoSeed = errors.New("gossip: no seed accepted the join")
	// ErrDuplicateRank is wrapped when two processes claim the same rank.
	ErrDuplicateRank = errors.New("gossip: duplicate rank")
	// ErrClosed is returned by calls on a closed Seed or Node.
	ErrClosed = errors.New("gossip: closed")
	// ErrConfig is wrapped by errors about an invalid Config, Member or size.
	ErrConfig = errors.New("gossip: invalid config")
)

// Seed is the launcher's gossip node (rank -1) that ranks join.
// Its methods are safe for concurrent use.
type Seed struct{ c *core }

// OpenSeed starts the launcher's gossip node (rank -1) that ranks join.
// With cfg.Seeds, the new seed joins those (other seeds of the job) first.
// cfg.OnLost, if set, is called for every rank the seed saw and then lost.
func OpenSeed(cfg Config) (*Seed, error) {
	host, _ := os.Hostname()
	self := Member{Rank: SeedRank, Hostname: host, Pid: os.Getpid()}
	c, err := open(cfg, seedPrefix+randomHex(), self)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.armLocked()
	c.mu.Unlock()
	if len(cfg.Seeds) > 0 {
		if _, err := c.ml.Join(cfg.Seeds); err != nil {
			c.close(false)
			return nil, fmt.Errorf("gossip: seed joining seeds %s: %w", strings.Join(cfg.Seeds, ","), err)
		}
	}
	return &Seed{c}, nil
}

// Addr returns the "ip:port" ranks join, for GORUN_SEEDS.
func (s *Seed) Addr() string { return s.c.addr() }

// Wait blocks until ranks 0..size-1 have all been known to the seed (a rank
// gone since still counts), and returns them sorted by rank. On ctx expiry the error is a *MissingError; a rank
// claimed twice gives an error wrapping ErrDuplicateRank.
func (s *Seed) Wait(ctx context.Context, size int) ([]Member, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w: size %d", ErrConfig, size)
	}
	return s.c.await(ctx, size, false, false)
}

// Members returns the ranks the seed knows alive, sorted by rank.
func (s *Seed) Members() []Member { return s.c.members() }

// Close leaves the gossip and stops the seed; ranks that already joined
// carry on among themselves. It is idempotent and waits.
func (s *Seed) Close() error { return s.c.close(true) }

// Node is a rank's membership in the job's gossip.
// Its methods are safe for concurrent use.
type Node struct{ c *core }

// Join joins the job as self.Rank and returns once all size ranks
// 0..size-1 are known to this node, with the table sorted by rank. A rank
// that arrived and left again before Join returned still counts, and is
// reported through OnLost right after.
// It retries cfg.Seeds until one accepts it; once in, it no longer needs
// the seeds. ctx bounds the wait: on expiry the error is a *MissingError
// (errors.Is ErrTimeout) naming the missing ranks. A rank claimed by two
// processes gives an error wrapping ErrDuplicateRank. self.Pid and
// self.Hostname default to this process's.
func Join(ctx context.Context, cfg Config, self Member, size int) (*Node, []Member, error) {
	return join(ctx, cfg, self, size, nil)
}

// join is Join with a hook that sees the core as soon as it listens (tests).
func join(ctx context.Context, cfg Config, self Member, size int, started func(*core)) (*Node, []Member, error) {
	if size < 1 || self.Rank < 0 || self.Rank >= size {
		return nil, nil, fmt.Errorf("%w: rank %d of size %d: want 0 <= rank < size", ErrConfig, self.Rank, size)
	}
	if self.Pid == 0 {
		self.Pid = os.Getpid()
	}
	if self.Hostname == "" {
		self.Hostname, _ = os.Hostname()
	}
	c, err := open(cfg, nodeName(self.Rank), self)
	if err != nil {
		return nil, nil, err
	}
	if started != nil {
		started(c)
	}
	ms, err := c.await(ctx, size, true, true)
	if err != nil {
		// A duplicate must not leave: its leave message carries the rank's
		// name and would make peers drop the genuine rank.
		c.close(!errors.Is(err, ErrDuplicateRank))
		return nil, nil, fmt.Errorf("gossip: rank %d joining job %s: %w", self.Rank, cfg.JobID, err)
	}
	return &Node{c}, ms, nil
}

// Addr returns this node's gossip address "ip:port"; other ranks may join it.
func (n *Node) Addr() string { return n.c.addr() }

// Members returns the ranks currently alive, sorted by rank.
func (n *Node) Members() []Member { return n.c.members() }

// Close leaves the gossip gracefully (peers report the rank as "left"),
// stops every goroutine and waits. It is idempotent. It does not wait for
// an OnLost call in progress, so OnLost may call Close; OnLost is not
// called once Close has begun.
func (n *Node) Close() error { return n.c.close(true) }

func randomHex() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
