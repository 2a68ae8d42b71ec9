package hosts

import (
	"fmt"
	"strings"
)

// Policy says how Map deals ranks to hosts.
type Policy int

const (
	// BySlot fills each host's slots, in host order, before the next host:
	// ranks 0..3 on a 4-slot first host. The default, as in Open MPI.
	BySlot Policy = iota
	// ByNode deals ranks round-robin over the hosts that have free slots:
	// rank 0 on the first host, rank 1 on the second, and so on.
	ByNode
)

// String returns the --map-by name of p.
func (p Policy) String() string {
	switch p {
	case BySlot:
		return "slot"
	case ByNode:
		return "node"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy reads a --map-by value: "slot" or "node", in any case.
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "slot":
		return BySlot, nil
	case "node":
		return ByNode, nil
	}
	return 0, fmt.Errorf("unknown mapping policy %q; choose slot or node: %w", s, ErrSyntax)
}

// MapOptions tunes Map. The zero value maps by slot without
// oversubscribing.
type MapOptions struct {
	Policy Policy
	// NPerNode, when positive, places exactly NPerNode ranks on each host,
	// filling hosts in order (so only the last used host may have fewer
	// when np is not a multiple). np 0 then means NPerNode per host.
	NPerNode int
	// Oversubscribe allows more ranks on a host than its slots, up to its
	// max_slots.
	Oversubscribe bool
}

// Placement is where one rank runs, with what the launcher puts in its
// environment.
type Placement struct {
	Rank      int // GORUN_RANK
	HostIndex int // index into the hosts given to Map
	LocalRank int // GORUN_LOCAL_RANK: rank among this host's ranks
	LocalSize int // GORUN_LOCAL_SIZE: ranks on this host
	NodeRank  int // GORUN_NODE_RANK: index among the hosts that have ranks
	NodeCount int // GORUN_NODE_COUNT: number of hosts that have ranks
}

// Map places np ranks on hosts and returns one Placement per rank, in rank
// order. np 0 means one rank per slot (as mpirun without -np), or NPerNode
// per host when that is set. More ranks than slots is a *SlotsError
// matching ErrNotEnoughSlots, unless opt.Oversubscribe; then ranks wrap
// around the hosts as in Open MPI, but never beyond a host's MaxSlots
// (ErrMaxSlots). Hosts that get no rank do not count as nodes.
func Map(hosts []Host, np int, opt MapOptions) ([]Placement, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("mapping ranks: %w", ErrNoHosts)
	}
	if opt.Policy != BySlot && opt.Policy != ByNode {
		return nil, fmt.Errorf("mapping ranks: unknown policy %v: %w", opt.Policy, ErrSyntax)
	}
	if opt.NPerNode < 0 || opt.NPerNode > MaxSlots {
		return nil, fmt.Errorf("mapping ranks: %d ranks per node; want 1 to %d: %w", opt.NPerNode, MaxSlots, ErrSyntax)
	}
	soft, hard, err := limits(hosts, opt)
	if err != nil {
		return nil, err
	}
	if np < 0 {
		return nil, fmt.Errorf("mapping ranks: %d ranks requested; want 0 (one per slot) or more: %w", np, ErrSyntax)
	}
	if np == 0 {
		if np = sum(soft); np == 0 {
			return nil, fmt.Errorf("mapping ranks: the hosts have no slots: %w", ErrNotEnoughSlots)
		}
	}
	if np > MaxSlots {
		return nil, fmt.Errorf("mapping ranks: %d ranks requested; at most %d: %w", np, MaxSlots, ErrTooLarge)
	}
	if err := fits(np, soft, hard, opt); err != nil {
		return nil, err
	}
	var order []int // order[rank] = host index
	if opt.Policy == ByNode {
		order = dealByNode(np, soft, hard)
	} else {
		order = dealBySlot(np, soft, hard)
	}
	return place(order, len(hosts)), nil
}

// limits returns, per host, how many ranks it takes before being
// oversubscribed (soft) and at most (hard; -1 for no limit).
func limits(hosts []Host, opt MapOptions) (soft, hard []int, err error) {
	soft, hard = make([]int, len(hosts)), make([]int, len(hosts))
	for i, h := range hosts {
		if h.Slots < 0 || h.MaxSlots < 0 {
			return nil, nil, fmt.Errorf("mapping ranks: host %s has negative slots: %w", h.Name, ErrSyntax)
		}
		soft[i], hard[i] = h.Slots, h.Slots
		if opt.Oversubscribe {
			hard[i] = -1
			if h.MaxSlots > 0 {
				hard[i] = max(h.MaxSlots, h.Slots)
			}
		}
		if opt.NPerNode > 0 {
			if hard[i] >= 0 && opt.NPerNode > hard[i] {
				return nil, nil, npernodeError(h, opt)
			}
			soft[i], hard[i] = opt.NPerNode, opt.NPerNode
		}
	}
	return soft, hard, nil
}

func npernodeError(h Host, opt MapOptions) error {
	if !opt.Oversubscribe || h.MaxSlots == 0 {
		return fmt.Errorf("mapping %d %s per node on host %s: %w", opt.NPerNode, plural(opt.NPerNode, "rank"), h.Name,
			&SlotsError{Requested: opt.NPerNode, Slots: h.Slots, Hosts: 1, Err: ErrNotEnoughSlots})
	}
	return fmt.Errorf("mapping %d %s per node on host %s: %w", opt.NPerNode, plural(opt.NPerNode, "rank"), h.Name,
		&SlotsError{Requested: opt.NPerNode, Slots: h.MaxSlots, Hosts: 1, Err: ErrMaxSlots})
}

// fits checks that np ranks fit within the limits.
func fits(np int, soft, hard []int, opt MapOptions) error {
	if opt.NPerNode > 0 {
		if n := opt.NPerNode * len(soft); np > n {
			return fmt.Errorf("mapping ranks: %d ranks requested but %d per node on %d hosts places %d; add hosts or raise the per-node count: %w",
				np, opt.NPerNode, len(soft), n, ErrNotEnoughSlots)
		}
		return nil
	}
	slots := sum(soft)
	if np <= slots {
		return nil
	}
	if !opt.Oversubscribe {
		return &SlotsError{Requested: np, Slots: slots, Hosts: len(soft), Err: ErrNotEnoughSlots}
	}
	total := 0
	for _, h := range hard {
		if h < 0 {
			return nil
		}
		total += h
	}
	if np > total {
		return &SlotsError{Requested: np, Slots: total, Hosts: len(soft), Err: ErrMaxSlots}
	}
	return nil
}

// dealBySlot fills hosts in order up to their slots, then hands out the
// rest one per host in turns up to the hard limits; each host's ranks are
// contiguous.
func dealBySlot(np int, soft, hard []int) []int {
	counts := make([]int, len(soft))
	left := np
	for i := range soft {
		counts[i] = min(soft[i], left)
		left -= counts[i]
	}
	for progress := true; left > 0 && progress; {
		progress = false
		for i := range counts {
			if left > 0 && (hard[i] < 0 || counts[i] < hard[i]) {
				counts[i]++
				left--
				progress = true
			}
		}
	}
	order := make([]int, 0, np)
	for i, c := range counts {
		for range c {
			order = append(order, i)
		}
	}
	return order
}

// dealByNode deals ranks round-robin over hosts with free slots, then,
// once every host is full, over hosts below their hard limit.
func dealByNode(np int, soft, hard []int) []int {
	counts := make([]int, len(soft))
	order := make([]int, 0, np)
	for _, limit := range [][]int{soft, hard} {
		for len(order) < np {
			progress := false
			for i := range counts {
				if len(order) < np && (limit[i] < 0 || counts[i] < limit[i]) {
					counts[i]++
					order = append(order, i)
					progress = true
				}
			}
			if !progress {
				break
			}
		}
	}
	return order
}

// place turns a rank -> host assignment into placements.
func place(order []int, nhosts int) []Placement {
	size := make([]int, nhosts)
	for _, h := range order {
		size[h]++
	}
	node := make([]int, nhosts)
	nodes := 0
	for i, s := range size {
		if s > 0 {
			node[i] = nodes
			nodes++
		}
	}
	next := make([]int, nhosts)
	out := make([]Placement, len(order))
	for r, h := range order {
		out[r] = Placement{Rank: r, HostIndex: h, LocalRank: next[h], LocalSize: size[h], NodeRank: node[h], NodeCount: nodes}
		next[h]++
	}
	return out
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}
