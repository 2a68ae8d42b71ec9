package prims

import (
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// hier is a communicator's split for hierarchical algorithms, made once
// (two Splits) and cached in its state.
type hier struct {
	layout  topo.Layout
	local   *spmd.Comm // the ranks on this rank's host, in rank order
	leaders *spmd.Comm // the lowest rank of each host, in host order; nil elsewhere
}

// hierOf returns k's communicator's split, making it on first use. Every
// rank reaches the first use in the same call, so the Splits match.
func hierOf(k *call) (*hier, error) {
	k.st.mu.Lock()
	h := k.st.hier
	k.st.mu.Unlock()
	if h != nil {
		return h, nil
	}
	l := topo.LayoutOf(k.c)
	r := k.c.Rank()
	local, err := k.c.Split(k.ctx, l.Host(r), r)
	if err != nil {
		return nil, err
	}
	color := spmd.Undefined
	if l.LocalRank(r) == 0 {
		color = 0
	}
	leaders, err := k.c.Split(k.ctx, color, r)
	if err != nil {
		return nil, err
	}
	h = &hier{layout: l, local: local, leaders: leaders}
	k.st.mu.Lock()
	k.st.hier = h
	k.st.mu.Unlock()
	return h, nil
}

// hierPhases prices the phases of a hierarchical algorithm: inside every
// host (the hosts in parallel, on the Local link) and across hosts between
// their leaders (on the Remote link), each by its cheapest flat algorithm,
// as the phases' sub-calls choose it.
type hierPhases struct {
	m                   topo.Model
	perHost, hosts      int
	inHost, overLeaders topo.Layout
}

// hierPhasesOf returns the phases of a hierarchical algorithm on the ranks
// of s, or ok=false where it does not apply (one host, or one rank on
// every host).
func hierPhasesOf(m topo.Model, s topo.Shape) (h hierPhases, ok bool) {
	if !s.Layout.Hierarchical() {
		return hierPhases{}, false
	}
	return hierPhases{m: m, perHost: s.PerHost, hosts: s.Hosts, inHost: topo.Uniform(1, s.PerHost), overLeaders: topo.Uniform(s.Hosts, 1)}, true
}

// in is the cost of coll of n bytes inside the busiest host.
func (h hierPhases) in(coll topo.Collective, n float64) float64 {
	return cheapestCost(h.m, coll, h.perHost, n, h.inHost)
}

// across is the cost of coll of n bytes across the hosts' leaders.
func (h hierPhases) across(coll topo.Collective, n float64) float64 {
	return cheapestCost(h.m, coll, h.hosts, n, h.overLeaders)
}

// hierAllReduce reduces to each host's leader, all-reduces across the
// leaders, and broadcasts inside each host.
func hierAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	h, err := hierOf(k)
	if err != nil {
		return err
	}
	bytes := len(buf) * sizeOf[T]()
	if err := reduce(k.sub(h.local, topo.Reduce, bytes, topo.Tree), buf, buf, 0, op); err != nil {
		return err
	}
	if h.leaders != nil {
		if err := allReduce(k.sub(h.leaders, topo.AllReduce, bytes, topo.Ring), buf, op); err != nil {
			return err
		}
	}
	return broadcast(k.sub(h.local, topo.Broadcast, bytes, topo.Tree), buf, 0)
}

// hierAllReduceCost is hierAllReduce's.
func hierAllReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	h, ok := hierPhasesOf(m, s)
	if !ok {
		return never
	}
	return estimate{rounds: h.in(topo.Reduce, n) + h.across(topo.AllReduce, n) + h.in(topo.Broadcast, n)}
}

// hierBcast broadcasts inside the root's host, across the leaders, and
// inside the other hosts.
func hierBcast[T spmd.Number](k *call, buf []T, root int) error {
	h, err := hierOf(k)
	if err != nil {
		return err
	}
	l, r := h.layout, k.c.Rank()
	bytes := len(buf) * sizeOf[T]()
	rootHost := l.Host(root)
	localRoot := 0
	if l.Host(r) == rootHost {
		localRoot = l.LocalRank(root)
		if err := broadcast(k.sub(h.local, topo.Broadcast, bytes, topo.Tree), buf, localRoot); err != nil {
			return err
		}
	}
	if h.leaders != nil {
		if err := broadcast(k.sub(h.leaders, topo.Broadcast, bytes, topo.Tree), buf, rootHost); err != nil {
			return err
		}
	}
	if l.Host(r) != rootHost {
		return broadcast(k.sub(h.local, topo.Broadcast, bytes, topo.Tree), buf, 0)
	}
	return nil
}

// hierBcastCost is hierBcast's.
func hierBcastCost(m topo.Model, s topo.Shape, n float64) estimate {
	h, ok := hierPhasesOf(m, s)
	if !ok {
		return never
	}
	return estimate{rounds: h.across(topo.Broadcast, n) + h.in(topo.Broadcast, n)}
}

// hierReduce reduces to each host's leader, across the leaders to the
// root's host's leader, which hands the result to the root.
func hierReduce[T spmd.Number](k *call, src, dst []T, root int, op Op[T]) error {
	h, err := hierOf(k)
	if err != nil {
		return err
	}
	l, r := h.layout, k.c.Rank()
	bytes := len(src) * sizeOf[T]()
	w := dst // the leader's running result; elsewhere a work buffer or nil
	if h.leaders != nil && w == nil {
		w = borrow[T](k, len(src))
	}
	if err := reduce(k.sub(h.local, topo.Reduce, bytes, topo.Tree), src, w, 0, op); err != nil {
		return err
	}
	if h.leaders != nil {
		if err := reduce(k.sub(h.leaders, topo.Reduce, bytes, topo.Tree), w, w, l.Host(root), op); err != nil {
			return err
		}
	}
	lroot := l.LocalRank(root)
	if l.Host(r) != l.Host(root) || lroot == 0 {
		return nil
	}
	lc, t := h.local.Collective(), tag(k.coll, phaseGather)
	if r == root {
		return recvFrom(k.ctx, lc, 0, t, dst)
	}
	if h.leaders != nil {
		return sendTo(k.ctx, lc, lroot, t, w)
	}
	return nil
}

// hierReduceCost is hierReduce's (the hand-over to a root that is not its
// host's leader left out).
func hierReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	h, ok := hierPhasesOf(m, s)
	if !ok {
		return never
	}
	return estimate{rounds: h.in(topo.Reduce, n) + h.across(topo.Reduce, n)}
}
