package prims

import (
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// The rooted Shared algorithms, Reduce, Gather and Scatter, and their
// costs: the small ones through the folds' ring (collectPiece) or the
// broadcasts' cells, the larger ones through the slots' rounds or the
// streams.

// sharedReduce reduces src into dst at root. Below sharedScatterMin bytes
// it is a piece of the folds' ring (collectPiece); larger ones go in rounds of
// up to sharedChunk bytes, as sharedAllReduce's, except that only the root
// takes the result: each rank reduces its own block of every part and the
// root copies the others' reduced blocks out (reduceToRoot), which the
// others skip, and a last piece below sharedScatterMin bytes is a piece of
// the folds' ring too. src is never modified, except at the root when
// reducing in place; dst is the result at the root and not used elsewhere.
func sharedReduce[T spmd.Number](k *call, src, dst []T, root int, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.Tree, func() error { return treeReduce(k, src, dst, root, op) })
	}
	per, me := sharedChunk/sizeOf[T](), k.cc.Rank()
	var work []T // a block's reduction at a rank other than the root
	for lo := 0; lo < len(src); lo += per {
		hi := min(lo+per, len(src))
		var out []T
		if me == root {
			out = dst[lo:hi]
		}
		if (hi-lo)*sizeOf[T]() < sharedScatterMin {
			a.foldings++
			err = collectPiece(k, a, a.foldings, src[lo:hi], out, root, op)
		} else {
			if me != root {
				if work == nil {
					work = borrow[T](k, min(per, len(src))/k.cc.Size()+1)
				}
				out = work
			}
			err = reduceToRoot(k, a, src[lo:hi], out, root, op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// collectPiece collects a small part of every rank at root, piece s of the
// folds' ring: every rank waits until the root of the piece that last used
// its cell is done with it (at once unless that root lags the whole ring
// behind), writes its part there and goes on; the root takes the parts,
// its own where it is, in rank order and says it is done with the piece. A Reduce (op.reduce set) folds them
// into dst, from rank 0's on; a Gather (the zero Op) copies rank r's into
// dst's block r. The count of a rank that was last a root is read only
// when the one read before (g.seen) is too old, as castPiece reads them.
func collectPiece[T spmd.Number](k *call, a *area, s uint32, src, dst []T, root int, op Op[T]) error {
	g, me := &a.folds, k.cc.Rank()
	// Before the first g.n pieces free wraps below zero, which every
	// count has reached (the cells' roots are rank 0 then).
	slot, free := s&(g.n-1), s-g.n
	if r := a.foldRoots[slot]; r != me && int32(g.seen[r]-free) < 0 {
		done := g.doneBy(a, r)
		if err := done.wait(k, r, free); err != nil {
			return err
		}
		g.seen[r] = done.round.Load()
	}
	a.foldRoots[slot] = root
	off := g.bufOff(s)
	if me != root {
		toSlot(&a.in, at[T](a, off+me*foldStride, len(src)), src)
		h := (*slotHead)(unsafe.Pointer(&a.mem[off+me*foldStride]))
		k.stamp(h)
		h.part.store(s)
		return nil
	}
	// The root reads its own part where it is, unless a fold in place
	// would overwrite it first (dst is src and the fold starts from
	// another rank's): then it keeps a copy in its cell, which nobody
	// else reads.
	mine := src
	if op.reduce != nil && root != 0 && len(src) > 0 && &src[0] == &dst[0] {
		mine = at[T](a, off+me*foldStride, len(src))
		copy(mine, src)
	}
	for r := range a.p {
		theirs := mine
		if r != me {
			h := (*slotHead)(unsafe.Pointer(&a.mem[off+r*foldStride]))
			if err := h.part.wait(k, r, s); err != nil {
				return err
			}
			if err := k.matches(r, h); err != nil {
				return err
			}
			theirs = at[T](a, off+r*foldStride, len(src))
		}
		switch {
		case op.reduce == nil:
			copy(dst[r*len(src):(r+1)*len(src)], theirs)
		case r == 0:
			copy(dst, theirs)
		default:
			op.reduce(dst, theirs)
		}
	}
	g.doneBy(a, me).store(s)
	return nil
}

// reduceToRoot is a round of sharedReduce in which rank r reduces only
// block r (Block's cut), as in sharedScatter: every rank writes the other
// blocks of its part into its slot and reduces theirs into its own block;
// the root reduces into out and copies the others' reduced blocks from
// their slots, where the others leave them, reduced in out (their work
// buffer) and then written by toSlot: reduced in the slot itself, with
// plain stores to lines the root had read, 2-4 MiB took 1.4-1.6x the
// Shared all-reduce's time at np 2. Two waits for the root, one for the
// others.
func reduceToRoot[T spmd.Number](k *call, a *area, part, out []T, root int, op Op[T]) error {
	round, slot, lo, hi, err := scatterIn(k, a, part)
	if err != nil {
		return err
	}
	acc := out[:hi-lo]
	if k.cc.Rank() == root {
		acc = out[lo:hi]
	}
	copy(acc, part[lo:hi]) // nothing to copy at a root in place
	if err := reduceOthers(k, a, round, len(part), lo, op, acc); err != nil {
		return err
	}
	if k.cc.Rank() != root {
		toSlot(&a.in, slot[lo:hi], acc)
		a.head(k.cc.Rank(), round).reduced.store(round)
		return nil
	}
	return reducedOut(k, a, round, out)
}

// sharedReduceCost is sharedReduce's. A small one is a piece of the
// folds' ring, through which the others run ahead of the root as through
// a message algorithm's queues: the wait is a pair's, as a broadcast's
// piece's, and the root copies its part in and folds the p-1 others.
// Larger ones go round by round: the root's rounds are a Shared
// all-reduce's; on a host with more ranks than cores, where all the ranks'
// copies share the cores, the copies out that only the root makes cost
// (p-1)/p of a part among p ranks, not at every rank.
func sharedReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	if n > 0 && n < sharedScatterMin {
		return sharedCost(m, s, n, func(float64) float64 {
			return sharedLatency*m.Handoff(s, 2) + n*sharedCopy(m, s) + float64(s.P-1)*n*m.GammaBusy(s.PerHost)
		})
	}
	if s.PerHost <= m.Cores {
		return sharedAllReduceCost(m, s, n)
	}
	return sharedCost(m, s, n, func(wait float64) float64 {
		b, g, p := sharedCopy(m, s), m.GammaBusy(s.PerHost), float64(s.P)
		return sharedRounds(n, func(c float64) float64 {
			if c < sharedScatterMin {
				return wait + c*b + (p-1)*c*g
			}
			return 2*wait + (1+(p-1)/(p*p))*c*b + (p-1)/p*c*g
		})
	})
}

// sharedGather collects every rank's send into recv at root: blocks below
// sharedScatterMin bytes as a piece of the folds' ring (collectPiece), as
// a small Reduce; larger ones in rounds of up to sharedChunk bytes of
// every block, which every rank but the root writes into its slot and the
// root copies out as they come, the others waiting before they next write
// the slot for the root only (rootReads).
func sharedGather[T spmd.Number](k *call, send, recv []T, root int) error {
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.Linear, func() error { return linearGather(k, send, recv, root) })
	}
	if len(send)*sizeOf[T]() < sharedScatterMin {
		a.foldings++
		return collectPiece(k, a, a.foldings, send, recv, root, Op[T]{})
	}
	me, kk, per := k.cc.Rank(), len(send), sharedChunk/sizeOf[T]()
	for lo := 0; lo < kk; lo += per {
		n := min(per, kk-lo)
		round := a.next()
		if err := a.claimRead(k, round, rootReads, root, me == root, me != root); err != nil {
			return err
		}
		if me != root {
			toSlot(&a.in, data[T](a, me, round, n), send[lo:lo+n])
			a.publish(k, me, round)
			continue
		}
		a.publish(k, me, round) // done with the round before: the others may write
		copyIn(recv[me*kk+lo:me*kk+lo+n], send[lo:lo+n])
		err := a.asReady(k, round,
			func(r int) *signal { return &a.head(r, round).part },
			func(r int) { copy(recv[r*kk+lo:r*kk+lo+n], data[T](a, r, round, n)) })
		if err != nil {
			return err
		}
	}
	return nil
}

// sharedGatherCost is sharedGather's, and sharedScatterBlocks': the root
// copies all n bytes, in or out, one wait exposed (the others run a round,
// or through the rings many pieces, ahead of it, so the later waits
// overlap its copies), while the others copy their blocks at the same
// time, on cores of their own, or sharing them: then the (2p-1)/p
// copies of every byte take the host's cores, unless the root's own n
// take longer. Priced with a wait per round and every copy sharing the
// cores, as the other Shared algorithms are, it came out at 2-4x its
// measured time on 2 cores and lost to the linear gather, which took 1.5-5x
// the Shared one's time from 2 KiB at np 2 and 4 (bench/results/choice/shm-h).
func sharedGatherCost(m topo.Model, s topo.Shape, n float64) estimate {
	p, cores := float64(s.P), float64(max(1, min(s.PerHost, m.Cores)))
	return sharedCost(m, s, n, func(float64) float64 {
		return sharedLatency*m.Handoff(s, 2) + n*m.Local.Beta*max(1, (2*p-1)/(p*cores))
	})
}

// sharedScatterBlocks hands every rank its block of root's send: through
// the cells, as a broadcast of the whole buffer of which every rank copies
// its block, when it fits one; else through the streams, sharedChunk
// bytes of the buffer a piece, a rank copying the part of its block in
// each piece and counting the others done without waiting for them.
func sharedScatterBlocks[T spmd.Number](k *call, send, recv []T, root int) error {
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.Linear, func() error { return linearScatter(k, send, recv, root) })
	}
	me, kk := k.cc.Rank(), len(recv)
	mine, total := me*kk, k.cc.Size()*kk
	if me == root {
		defer copyIn(recv, send[mine:mine+kk])
	}
	if total*sizeOf[T]() <= sharedCell {
		a.casts++
		var dst []T
		if me != root {
			dst = recv
		}
		return castPiece(k, a, &a.cells, a.casts, total, send, dst, mine, root)
	}
	per := sharedChunk / sizeOf[T]()
	for lo := 0; lo < total; lo += per {
		hi := min(lo+per, total)
		a.chunks++
		var src, dst []T
		wlo, whi := max(lo, mine), min(hi, mine+kk)
		if me == root {
			src = send[lo:hi]
		} else if wlo < whi {
			dst = recv[wlo-mine : whi-mine]
		}
		if err := castPiece(k, a, &a.streams, a.chunks, hi-lo, src, dst, max(0, wlo-lo), root); err != nil {
			return err
		}
	}
	return nil
}
