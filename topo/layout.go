package topo

import (
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
)

// Layout is how the ranks of a communicator sit on hosts. Hosts are ordered
// by their lowest rank, and the ranks of each host in rank order, so every
// rank that builds the Layout of one communicator builds the same one.
type Layout struct {
	Hosts   [][]int  // communicator ranks on each host
	HostIDs []string // HostIDs[h] is the identity of host h
	Names   []string // Names[h] is the hostname of host h, for people
	// Shared says that the ranks can share memory (spmd.Comm.Shares), as
	// the Shared algorithms need: they are on one host, reached through
	// shared memory.
	Shared bool
	host   []int // rank -> index into Hosts
	local  []int // rank -> index among its host's ranks

	xorCross []bool // xorCross[k]: some pair r, r^(1<<k) (both < p) spans two hosts
	addCross []bool // addCross[k]: some pair r, r+(1<<k) with r%(2<<k)==0 spans two hosts
}

// Detect groups the ranks of c by the host identity the rendezvous reported
// for them (Comm.Peer(r).HostID). It does not communicate.
func Detect(c *spmd.Comm) Layout {
	p := c.Size()
	ids := make([]string, p)
	names := make([]string, p)
	for r := range p {
		peer := c.Peer(r)
		ids[r], names[r] = peer.HostID, peer.Hostname
	}
	l := FromHostIDs(ids)
	l.Names = make([]string, len(l.Hosts))
	for h, ranks := range l.Hosts {
		l.Names[h] = names[ranks[0]]
	}
	l.Shared = c.Shares()
	return l
}

// FromHostIDs returns the layout of ranks whose hosts have the identities
// ids (ids[r] for rank r), as Detect builds it from the rendezvous; it does
// not say whether they share memory (Shared).
func FromHostIDs(ids []string) Layout {
	var l Layout
	index := map[string]int{}
	l.host = make([]int, len(ids))
	l.local = make([]int, len(ids))
	for r, id := range ids {
		h, ok := index[id]
		if !ok {
			h = len(l.Hosts)
			index[id] = h
			l.Hosts = append(l.Hosts, nil)
			l.HostIDs = append(l.HostIDs, id)
		}
		l.host[r] = h
		l.local[r] = len(l.Hosts[h])
		l.Hosts[h] = append(l.Hosts[h], r)
	}
	l.Names = append([]string(nil), l.HostIDs...)
	l.crossings()
	return l
}

// crossings fills the tables that say which rounds of the distance-based
// schedules (recursive doubling, binomial trees) cross hosts.
func (l *Layout) crossings() {
	p := len(l.host)
	for d := 1; d < p; d <<= 1 {
		x, a := false, false
		for r := 0; r < p; r++ {
			if q := r ^ d; q < p && l.host[r] != l.host[q] {
				x = true
			}
			if q := r + d; r%(2*d) == 0 && q < p && l.host[r] != l.host[q] {
				a = true
			}
		}
		l.xorCross = append(l.xorCross, x)
		l.addCross = append(l.addCross, a)
	}
}

// Uniform returns the layout of hosts hosts with perHost ranks each, the
// ranks of host h being h*perHost ... (h+1)*perHost-1 (block mapping, as
// gorun maps ranks by default). Tests and reports use it to ask the model
// about machines it is not running on.
func Uniform(hosts, perHost int) Layout {
	ids := make([]string, 0, hosts*perHost)
	for h := range hosts {
		for range perHost {
			ids = append(ids, fmt.Sprintf("host%d", h))
		}
	}
	return FromHostIDs(ids)
}

// Size returns the number of ranks in the layout.
func (l Layout) Size() int { return len(l.host) }

// Host returns the index into Hosts of rank r's host.
func (l Layout) Host(r int) int { return l.host[r] }

// LocalRank returns rank r's index among the ranks of its host.
func (l Layout) LocalRank(r int) int { return l.local[r] }

// LocalRanks returns the ranks that share rank r's host, r included, in
// rank order.
func (l Layout) LocalRanks(r int) []int { return l.Hosts[l.host[r]] }

// SameHost reports whether ranks a and b share a host.
func (l Layout) SameHost(a, b int) bool { return l.host[a] == l.host[b] }

// MaxPerHost returns the largest number of ranks on one host.
func (l Layout) MaxPerHost() int {
	m := 0
	for _, h := range l.Hosts {
		m = max(m, len(h))
	}
	return m
}

// Leaders returns the lowest rank of each host, in host order: the ranks
// that talk across hosts in hierarchical algorithms.
func (l Layout) Leaders() []int {
	ls := make([]int, len(l.Hosts))
	for h, ranks := range l.Hosts {
		ls[h] = ranks[0]
	}
	return ls
}

// XorCrosses reports whether round k of recursive doubling crosses hosts:
// whether some pair of ranks r, r^(1<<k), both in the layout, sits on two
// hosts.
func (l Layout) XorCrosses(k int) bool { return l.xorCross[k] }

// TreeCrosses reports whether round k of a binomial tree rooted at rank 0
// crosses hosts: whether some pair of ranks r, r+(1<<k) with r%(2<<k)==0,
// both in the layout, sits on two hosts.
func (l Layout) TreeCrosses(k int) bool { return l.addCross[k] }

// Hierarchical reports whether hierarchical algorithms apply: several hosts,
// and some host with several ranks.
func (l Layout) Hierarchical() bool {
	return len(l.Hosts) > 1 && l.MaxPerHost() > 1
}

// layoutKey caches a communicator's Layout with Comm.SetValue. It carries
// the communicator's id because communicators made by Split inherit their
// parent's values, and a child's layout is not its parent's.
type layoutKey struct{ comm uint32 }

// LayoutOf returns Detect(c), cached on c.
func LayoutOf(c *spmd.Comm) Layout {
	k := layoutKey{c.Collective().ID()}
	if l, ok := c.Value(k).(Layout); ok {
		return l
	}
	l := Detect(c)
	c.SetValue(k, l)
	return l
}
