package prims

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// AllGather collects every rank's send on every rank: rank i's elements
// land in recv[i*k:(i+1)*k], k = len(send), the same on every rank. recv
// has Size()*k elements; send may be recv's own block (in place), and
// must not overlap recv otherwise (ErrCount).
func AllGather[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, opts ...Option) (err error) {
	kk := len(send)
	if len(recv) != c.Size()*kk {
		return argError(c, topo.AllGather, countError("recv has %d elements, want %d ranks x %d", len(recv), c.Size(), kk))
	}
	if kk > 0 && !inPlaceOrApart(send, recv, c.Rank()*kk) {
		return argError(c, topo.AllGather, fmt.Errorf("%w: send overlaps recv other than as this rank's block %d: pass recv[%d:%d] or a buffer apart", ErrCount, c.Rank(), c.Rank()*kk, (c.Rank()+1)*kk))
	}
	k, err := start(ctx, c, topo.AllGather, len(recv)*sizeOf[T](), kk == 0 || c.Size() == 1, sig[T](-1, ""), opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	r := c.Rank()
	if kk == 0 || c.Size() == 1 {
		copyIn(recv[r*kk:(r+1)*kk], send)
		return nil
	}
	b := k.equalBounds(kk, c.Size())
	// The ring, linear and shared algorithms send this rank's block from
	// send and copy it into recv while it travels (see linearAllGather);
	// the others start from it in recv.
	switch k.algo {
	case topo.Ring:
		return ringAllGather(k, recv, b, r, send, tag(k.coll, phaseMain))
	case topo.Linear:
		return linearAllGather(k, recv, b, send)
	case topo.Shared:
		return sharedAllGather(k, recv, b, send)
	}
	copyIn(recv[r*kk:(r+1)*kk], send)
	switch k.algo {
	case topo.RecursiveDoubling:
		return recdblAllGather(k, recv, b)
	case topo.Hierarchical:
		return hierAllGather(k, recv, kk)
	}
	return algoError(k.coll, k.algo)
}

// allGatherCost is the cost of an all-gather of n bytes (all p blocks) by
// algo on the ranks of s.
func allGatherCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	block := n / float64(s.P)
	switch algo {
	case topo.Ring: // ringAllGather
		return estimate{ringCost(m, s, block, 0), ringMessages(s.P)}
	case topo.Linear:
		return linearAllGatherCost(m, s, n)
	case topo.RecursiveDoubling:
		return recdblAllGatherCost(m, s, n)
	case topo.Hierarchical:
		return hierAllGatherCost(m, s, n)
	case topo.Shared:
		return sharedAllGatherCost(m, s, n)
	}
	return never
}

// recdblAllGather swaps doubling ranges with partners at distance 1, 2, 4,
// ...; for p not a power of two the extra ranks fold their block into
// their partner's first and get the whole vector back last.
func recdblAllGather[T spmd.Number](k *call, buf []T, b []int) error {
	cc, ctx := k.cc, k.ctx
	f := newFold(cc.Size(), cc.Rank())
	r := cc.Rank()
	if f.paired() {
		t := tag(k.coll, phaseFold)
		if f.out() {
			err := sendTo(ctx, cc, f.partner(), t, buf[b[r]:b[r+1]])
			if err == nil {
				err = recvFrom(ctx, cc, f.partner(), tag(k.coll, phaseUnfold), buf)
			}
			return err
		}
		pr := f.partner()
		if err := recvFrom(ctx, cc, pr, t, buf[b[pr]:b[pr+1]]); err != nil {
			return err
		}
	}
	if err := double(k, f, buf, f.superBounds(k, b), phaseDouble); err != nil {
		return err
	}
	return foldOut(k, f, buf)
}

// linearAllGather has every rank send its block, own, to every other
// rank, all at once, each received in place; own is copied into this
// rank's block of buf (unless it is that block) while the messages
// travel. Sent from own, a block that its receivers copy out of the
// sender's memory (shared memory's single copy) is copied while the
// sender copies it into place, not after. np 2 on 2 cores, collbench,
// medians of 7 alternating runs, before -> after (Open MPI): 512 KiB
// 139 -> 39 us (23), 1 MiB 144 -> 82 (57), 2 MiB 124 -> 131 (120); the
// ring, which sends its first step so, 99 -> 38, 154 -> 74, 131 -> 154.
func linearAllGather[T spmd.Number](k *call, buf []T, b []int, own []T) error {
	cc, ctx := k.cc, k.ctx
	p, r := cc.Size(), cc.Rank()
	t := tag(k.coll, phaseMain)
	reqs := newPending()
	defer reqs.free()
	for s := 1; s < p; s++ {
		from, to := mod(r-s, p), mod(r+s, p)
		reqs.irecv(cc, from, t, spmd.Bytes(buf[b[from]:b[from+1]]))
		reqs.isend(ctx, cc, to, t, spmd.Bytes(own))
	}
	copyIn(buf[b[r]:b[r+1]], own)
	return reqs.waitAll(ctx)
}

// recdblAllGatherCost is recdblAllGather's: the extra ranks' blocks in,
// lg q rounds of doubling ranges, the whole vector back out.
func recdblAllGatherCost(m topo.Model, s topo.Shape, n float64) estimate {
	q := float64(pow2(s.P))
	return estimate{foldCost(m, s, n/float64(s.P), n, false) + doublingCost(m, s, func(k int) float64 { return n * float64(int(1)<<k) / q }, func(int) float64 { return 0 }),
		doublingMessages(s.P) + foldMessages(s.P)}
}

// linearAllGatherCost is linearAllGather's: one burst of p-1 blocks.
func linearAllGatherCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{m.Burst(s, n/float64(s.P), 0), ringMessages(s.P)}
}

// hierAllGather gathers each host's blocks at its leader, swaps them
// between the leaders, and broadcasts the whole vector inside each host.
// Every message lands in place.
func hierAllGather[T spmd.Number](k *call, buf []T, kk int) error {
	h, err := hierOf(k)
	if err != nil {
		return err
	}
	l, r := h.layout, k.c.Rank()
	lc, t := h.local.Collective(), tag(k.coll, phaseMain)
	mine := l.LocalRanks(r)
	if l.LocalRank(r) != 0 {
		if err := sendTo(k.ctx, lc, 0, t, buf[r*kk:(r+1)*kk]); err != nil {
			return err
		}
	} else {
		reqs := newPending()
		defer reqs.free()
		for i, q := range mine[1:] {
			reqs.irecv(lc, i+1, t, spmd.Bytes(buf[q*kk:(q+1)*kk]))
		}
		if err := reqs.waitAll(k.ctx); err != nil {
			return err
		}
		if err := swapHosts(k, h, buf, kk); err != nil {
			return err
		}
	}
	bytes := len(buf) * sizeOf[T]()
	return broadcast(k.sub(h.local, topo.Broadcast, bytes, topo.Tree), buf, 0)
}

// hierAllGatherCost is hierAllGather's: a gather inside every host, an
// all-gather across hosts, a broadcast inside every host.
func hierAllGatherCost(m topo.Model, s topo.Shape, n float64) estimate {
	h, ok := hierPhasesOf(m, s)
	if !ok {
		return never
	}
	share := float64(s.PerHost) / float64(s.P) // one host's part of the gathered buffer
	return estimate{rounds: h.in(topo.Gather, n*share) + h.across(topo.AllGather, n) + h.in(topo.Broadcast, n)}
}

// swapHosts sends this host's blocks to every other leader and receives
// theirs, one message per run of consecutive ranks on a host.
func swapHosts[T spmd.Number](k *call, h *hier, buf []T, kk int) error {
	xc, t := h.leaders.Collective(), tag(k.coll, phaseGather)
	me := h.leaders.Rank()
	reqs := newPending()
	defer reqs.free()
	for host, ranks := range h.layout.Hosts {
		for lo := 0; lo < len(ranks); {
			hi := lo + 1
			for hi < len(ranks) && ranks[hi] == ranks[hi-1]+1 {
				hi++
			}
			run := spmd.Bytes(buf[ranks[lo]*kk : (ranks[hi-1]+1)*kk])
			if host != me {
				reqs.irecv(xc, host, t, run)
			} else {
				for other := range h.layout.Hosts {
					if other != me {
						reqs.isend(k.ctx, xc, other, t, run)
					}
				}
			}
			lo = hi
		}
	}
	return reqs.waitAll(k.ctx)
}

// inPlaceOrApart reports whether send is recv[at:at+len(send)] itself or
// shares no element with recv: where it overlapped another rank's block,
// the algorithms that copy it into recv while it travels read it
// overwritten (linear gathered [102 103 102 103] for [102 103 100 101]).
func inPlaceOrApart[T spmd.Number](send, recv []T, at int) bool {
	if len(send) == 0 || len(recv) == 0 {
		return true
	}
	size := unsafe.Sizeof(send[0])
	s, r := uintptr(unsafe.Pointer(&send[0])), uintptr(unsafe.Pointer(&recv[0]))
	if s+uintptr(len(send))*size <= r || r+uintptr(len(recv))*size <= s {
		return true
	}
	return s == r+uintptr(at)*size
}
