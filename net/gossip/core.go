package gossip

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// core is what a Seed and a Node share: one memberlist node, the table of
// ranks it knows, and the goroutine that calls Config.OnLost.
//
// memberlist calls the delegate methods below with its node lock held; they
// only take c.mu, never call back into memberlist, and never block. c.mu is
// never held while calling memberlist or OnLost.
type core struct {
	cfg  Config
	name string
	ml   *memberlist.Memberlist
	done chan struct{} // closed by close
	// dispatched is closed when the OnLost goroutine has returned.
	dispatched chan struct{}
	wake       chan struct{} // (cap 1) new lost events
	closeOnce  sync.Once
	closeErr   error

	mu         sync.Mutex // protects following
	meta       []byte     // our encoded metadata (NodeMeta)
	self       Member
	table      map[int]peer    // alive ranks by rank
	seen       map[int]peer    // every rank ever alive, by rank
	others     int             // alive nodes other than ourselves (ranks and seeds)
	leaving    map[string]bool // names that announced a graceful leave
	dups       []error         // duplicate ranks seen, wrapping ErrDuplicateRank
	changed    chan struct{}   // closed and replaced on every change above
	armed      bool            // report losses through OnLost
	reported   map[int]bool    // ranks already given to OnLost
	lost       []lostEvent     // losses not yet given to OnLost
	closed     bool            // close has begun: no more OnLost calls
	inCallback bool            // OnLost is running
}

// peer is a rank's entry in the table.
type peer struct {
	Member
	name   string // memberlist node name
	gossip string // its gossip address "ip:port"
}

type lostEvent struct {
	rank int
	name string
	at   time.Time
}

// open starts a memberlist node called name with self as metadata.
func open(cfg Config, name string, self Member) (*core, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	meta, err := encodeMeta(self, 0)
	if err != nil {
		return nil, err
	}
	c := &core{
		cfg:        cfg,
		name:       name,
		done:       make(chan struct{}),
		dispatched: make(chan struct{}),
		wake:       make(chan struct{}, 1),
		meta:       meta,
		self:       self,
		table:      make(map[int]peer),
		seen:       make(map[int]peer),
		leaving:    make(map[string]bool),
		changed:    make(chan struct{}),
		reported:   make(map[int]bool),
	}
	ml, err := memberlist.Create(memberlistConfig(cfg, name, c))
	if err != nil {
		return nil, fmt.Errorf("gossip: start %s on %s:%d: %w", name, cfg.BindAddr, cfg.BindPort, err)
	}
	c.ml = ml
	c.logf("gossip: %s listening on %s (job %s)", name, c.addr(), cfg.JobID)
	go c.dispatch()
	return c, nil
}

// addr is the node's gossip address "ip:port".
func (c *core) addr() string { return c.ml.LocalNode().Address() }

func (c *core) logf(format string, args ...any) {
	if c.cfg.Logger != nil {
		c.cfg.Logger.Printf(format, args...)
	}
}

// changedLocked wakes every waiter. c.mu must be held.
func (c *core) changedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// membersLocked returns the ranks 0..size-1 of table sorted by rank (every
// rank when size < 0). c.mu must be held.
func (c *core) membersLocked(table map[int]peer, size int) []Member {
	ms := make([]Member, 0, len(table))
	for r, p := range table {
		if size < 0 || r < size {
			ms = append(ms, p.Member)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Rank < ms[j].Rank })
	return ms
}

// missingLocked returns the ranks 0..size-1 never seen. c.mu must be held.
func (c *core) missingLocked(size int) []int {
	var miss []int
	for r := 0; r < size; r++ {
		if _, ok := c.seen[r]; !ok {
			miss = append(miss, r)
		}
	}
	return miss
}

// The memberlist delegates. See the concurrency note on core.

// NodeMeta implements memberlist.Delegate.
func (c *core) NodeMeta(limit int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta
}

// NotifyMsg implements memberlist.Delegate; gossip carries no user messages.
func (c *core) NotifyMsg([]byte) {}

// GetBroadcasts implements memberlist.Delegate.
func (c *core) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate.
func (c *core) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate.
func (c *core) MergeRemoteState(buf []byte, join bool) {}

// NotifyAlive implements memberlist.AliveDelegate: it refuses nodes whose
// metadata does not decode or does not match their name.
func (c *core) NotifyAlive(n *memberlist.Node) error {
	m, flags, err := decodeMeta(n.Meta)
	if err == nil {
		err = checkName(n.Name, m)
	}
	if err != nil {
		return err
	}
	if flags&flagLeaving != 0 {
		c.mu.Lock()
		c.leaving[n.Name] = true
		c.mu.Unlock()
	}
	return nil
}

// NotifyJoin implements memberlist.EventDelegate.
func (c *core) NotifyJoin(n *memberlist.Node) { c.update(n, true) }

// NotifyUpdate implements memberlist.EventDelegate.
func (c *core) NotifyUpdate(n *memberlist.Node) { c.update(n, false) }

func (c *core) update(n *memberlist.Node, join bool) {
	m, flags, err := decodeMeta(n.Meta)
	if err != nil {
		return // NotifyAlive refused it already
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if join && n.Name != c.name {
		c.others++
	}
	if flags&flagLeaving != 0 {
		c.leaving[n.Name] = true
	}
	if m.Rank >= 0 {
		p := peer{Member: m, name: n.Name, gossip: n.Address()}
		c.table[m.Rank], c.seen[m.Rank] = p, p
	}
	if join && c.cfg.Logger != nil && n.Name != c.name {
		c.logf("gossip: %s: %s joined from %s (%d ranks known)", c.name, n.Name, n.Address(), len(c.table))
	}
	c.changedLocked()
}

// NotifyLeave implements memberlist.EventDelegate.
func (c *core) NotifyLeave(n *memberlist.Node) {
	m, _, err := decodeMeta(n.Meta)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.Name != c.name {
		c.others--
		c.logf("gossip: %s: %s is gone", c.name, n.Name)
	}
	if m.Rank < 0 {
		c.changedLocked()
		return
	}
	delete(c.table, m.Rank)
	if c.armed {
		c.lostLocked(m.Rank, n.Name)
	}
	c.changedLocked()
}

// lostLocked queues the loss of rank for OnLost. c.mu must be held.
func (c *core) lostLocked(rank int, name string) {
	if c.closed || c.reported[rank] {
		return
	}
	c.reported[rank] = true
	c.lost = append(c.lost, lostEvent{rank: rank, name: name, at: time.Now()})
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// armLocked starts OnLost reports, first of the ranks that were seen and
// are gone already. c.mu must be held.
func (c *core) armLocked() {
	if c.armed {
		return
	}
	c.armed = true
	for r, p := range c.seen {
		if _, ok := c.table[r]; !ok {
			c.lostLocked(r, p.name)
		}
	}
}

// NotifyConflict implements memberlist.ConflictDelegate: two nodes with one
// name are two processes claiming one rank.
func (c *core) NotifyConflict(existing, other *memberlist.Node) {
	a, _, _ := decodeMeta(existing.Meta)
	b, _, _ := decodeMeta(other.Meta)
	err := fmt.Errorf("%w: %s is claimed by two processes: pid %d on %s (%s) and pid %d on %s (%s)",
		ErrDuplicateRank, existing.Name, a.Pid, a.Hostname, existing.Address(), b.Pid, b.Hostname, other.Address())
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.dups {
		if d.Error() == err.Error() {
			return
		}
	}
	c.logf("gossip: %s: %v", c.name, err)
	c.dups = append(c.dups, err)
	c.changedLocked()
}

// members returns every alive rank sorted by rank.
func (c *core) members() []Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.membersLocked(c.table, -1)
}
