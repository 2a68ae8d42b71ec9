package gossip

import (
	"context"
	"errors"
	"log"
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
	// OnLost is called, after Join returned, once per rank that left or
	// failed, from a goroutine the Node owns (never under a memberlist lock).
	// reason starts with "left" for a graceful leave and "failed" otherwise.
	OnLost func(rank int, reason string)
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
	// ErrTimeout is wrapped by the error Join and Wait return when ctx
	// expires before every rank arrived; the message names the missing ranks.
	ErrTimeout = errors.New("gossip: ranks missing")
	// ErrDuplicateRank is wrapped when two processes claim the same rank.
	ErrDuplicateRank = errors.New("gossip: duplicate rank")
	// ErrClosed is returned by calls on a closed Seed or Node.
	ErrClosed = errors.New("gossip: closed")
	// ErrConfig is wrapped by errors about an invalid Config or Member.
	ErrConfig = errors.New("gossip: invalid config")
)

var errNotYet = errors.New("gossip: not yet implemented")

// Seed is the launcher's gossip node (rank -1) that ranks join.
// Its methods are safe for concurrent use.
type Seed struct{}

// OpenSeed starts the launcher's gossip node (rank -1) that ranks join.
func OpenSeed(cfg Config) (*Seed, error) { return nil, errNotYet }

// Addr returns the "ip:port" ranks join, for GORUN_SEEDS.
func (s *Seed) Addr() string { return "" }

// Wait blocks until ranks 0..size-1 are all known to the seed, and returns
// them sorted by rank.
func (s *Seed) Wait(ctx context.Context, size int) ([]Member, error) { return nil, errNotYet }

// Close leaves the gossip and stops the seed. It is idempotent.
func (s *Seed) Close() error { return nil }

// Node is a rank's membership in the job's gossip.
// Its methods are safe for concurrent use.
type Node struct{}

// Join joins the job as self.Rank and returns once all size ranks
// 0..size-1 are known to this node, with the table sorted by rank.
func Join(ctx context.Context, cfg Config, self Member, size int) (*Node, []Member, error) {
	return nil, nil, errNotYet
}

// Members returns the ranks currently alive, sorted by rank.
func (n *Node) Members() []Member { return nil }

// Close leaves the gossip gracefully, stops every goroutine and waits.
// It is idempotent.
func (n *Node) Close() error { return nil }
