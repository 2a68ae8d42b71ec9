package prims

import (
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// The Shared algorithms, round by round in the area that shared.go lays
// out.

// fellBack says that k runs algo instead of the Shared algorithm, its
// ranks being unable to share memory (areaOf): the call's errors and its
// record in the trace name the algorithm that ran.
func (k *call) fellBack(algo topo.Algo) {
	k.algo = algo
	if k.tr.rec != nil {
		k.tr.e.Algo = k.tr.rec.Intern(string(algo))
	}
}

// sharedAllReduce reduces buf in rounds of up to topo.SharedChunk bytes:
// folds below topo.SharedScatter bytes, where a round's latency counts
// most, and scatters from there, where the reductions do.
func sharedAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil {
		if err == nil {
			k.fellBack(topo.RecursiveDoubling)
			err = recdblAllReduce(k, buf, op)
		}
		return err
	}
	per := topo.SharedChunk / sizeOf[T]()
	for lo := 0; lo < len(buf); lo += per {
		out := buf[lo:min(lo+per, len(buf))]
		if len(out)*sizeOf[T]() < topo.SharedScatter {
			err = sharedFold(k, a, out, op)
		} else {
			err = sharedScatter(k, a, out, op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// put starts an all-reduce round: it waits until this rank's slot is
// free, copies its part in and says so.
func put[T spmd.Number](k *call, a *area, part []T) (uint32, error) {
	me := k.cc.Rank()
	round := a.next()
	if err := a.claim(k, round, readAfter, true, true); err != nil {
		return 0, err
	}
	toSlot(&a.in, data[T](a, me, round, len(part)), part)
	a.publish(me, round)
	return round, nil
}

// sharedFold is a round in which every rank folds all the parts, as they
// come, in rank order, (p0 op p1) op p2 ..., so that every rank gets the
// same bits whatever the op: one wait per rank, (p-1)n elements reduced by
// each.
func sharedFold[T spmd.Number](k *call, a *area, out []T, op Op[T]) error {
	round, err := put(k, a, out)
	if err != nil {
		return err
	}
	me, n := k.cc.Rank(), len(out)
	for r := range k.cc.Size() {
		if r != me {
			if err := a.await(k, r, round); err != nil {
				return err
			}
		}
		src := data[T](a, r, round, n)
		switch {
		case r == 0 && me != 0:
			copy(out, src)
		case r != 0:
			op.reduce(out, src)
		}
	}
	return nil
}

// reduceOthers reduces len(acc) elements from lo of every other rank's
// part of round, n elements each, into acc, in rank order.
func reduceOthers[T spmd.Number](k *call, a *area, round uint32, n, lo int, op Op[T], acc []T) error {
	me := k.cc.Rank()
	for r := range k.cc.Size() {
		if r == me {
			continue
		}
		if err := a.await(k, r, round); err != nil {
			return err
		}
		op.reduce(acc, data[T](a, r, round, n)[lo:lo+len(acc)])
	}
	return nil
}

// sharedScatter is a round in which rank r reduces only block r (Block's
// cut): every rank writes the other blocks of its part into its slot,
// reduces theirs into its own block of out, leaves the result in its
// slot in place of the block it did not write, and copies the others'
// results from theirs. Two waits per rank, n elements reduced by each
// rank in all. Each block is reduced by one rank only, so every rank gets
// the same bits whatever the order of the fold.
func sharedScatter[T spmd.Number](k *call, a *area, out []T, op Op[T]) error {
	p, me := k.cc.Size(), k.cc.Rank()
	n := len(out)
	lo, hi := Block(n, p, me)
	round := a.next()
	if err := a.claim(k, round, readAfter, true, true); err != nil {
		return err
	}
	slot := data[T](a, me, round, n)
	toSlot(&a.in, slot[:lo], out[:lo])
	toSlot(&a.in, slot[hi:], out[hi:])
	a.publish(me, round)
	acc := out[lo:hi]
	if err := reduceOthers(k, a, round, n, lo, op, acc); err != nil {
		return err
	}
	toSlot(&a.in, slot[lo:hi], acc)
	a.head(me, round).reduced.store(round)
	return a.asReady(k, round,
		func(r int) *signal { return &a.head(r, round).reduced },
		func(r int) {
			rlo, rhi := Block(n, p, r)
			copy(out[rlo:rhi], data[T](a, r, round, n)[rlo:rhi])
		})
}

// sharedBarrier is one round without data.
func sharedBarrier(k *call) error {
	a, err := areaOf(k)
	if a == nil {
		if err == nil {
			k.fellBack(topo.RecursiveDoubling)
			err = dissemination(k)
		}
		return err
	}
	me := k.cc.Rank()
	round := a.next()
	a.claim(k, round, noData, true, false) // writes nothing: no wait
	a.publish(me, round)
	for r := range k.cc.Size() {
		if r != me {
			if err := a.await(k, r, round); err != nil {
				return err
			}
		}
	}
	return nil
}

// sharedBcast copies root's buf into every rank's through the cells, when
// it fits one, or else topo.SharedChunk bytes at a time through the
// streams (castPiece).
func sharedBcast[T spmd.Number](k *call, buf []T, root int) error {
	a, err := areaOf(k)
	if a == nil {
		if err == nil {
			k.fellBack(topo.Tree)
			err = treeBcast(k, buf, root, phaseMain)
		}
		return err
	}
	if len(buf)*sizeOf[T]() <= topo.SharedCell {
		a.casts++
		return castPiece(k, a, a.cells, a.casts, buf, root)
	}
	per := topo.SharedChunk / sizeOf[T]()
	for lo := 0; lo < len(buf); lo += per {
		a.chunks++
		if err := castPiece(k, a, a.streams, a.chunks, buf[lo:min(lo+per, len(buf))], root); err != nil {
			return err
		}
	}
	return nil
}

// castPiece broadcasts piece s of ring g, buf: the root waits until every
// rank is done with the piece that last used the buffer (at once unless
// one lags g.n pieces behind), writes it and goes on; the others copy it
// out. Every rank then counts the piece done.
func castPiece[T spmd.Number](k *call, a *area, g castRing, s uint32, buf []T, root int) error {
	me := k.cc.Rank()
	if me == root {
		// Before the first g.n pieces the count wraps below zero, which
		// every rank has reached.
		for r := range a.p {
			if r != me {
				if err := g.doneBy(a, r).wait(k, r, s-g.n); err != nil {
					return err
				}
			}
		}
		toSlot(&a.in, castData[T](a, g, s, len(buf)), buf)
		g.head(a, s).part.store(s)
	} else {
		if err := g.head(a, s).part.wait(k, root, s); err != nil {
			return err
		}
		copy(buf, castData[T](a, g, s, len(buf)))
	}
	g.doneBy(a, me).store(s)
	return nil
}

// sharedAllGather gathers the blocks of b into every rank's buf,
// topo.SharedChunk bytes of each block a round: every rank writes its
// block's piece and copies the others' out.
func sharedAllGather[T spmd.Number](k *call, buf []T, b []int) error {
	a, err := areaOf(k)
	if a == nil {
		if err == nil {
			k.fellBack(topo.RecursiveDoubling)
			err = recdblAllGather(k, buf, b)
		}
		return err
	}
	me := k.cc.Rank()
	per := topo.SharedChunk / sizeOf[T]()
	for lo := 0; lo < b[1]-b[0]; lo += per {
		n := min(per, b[1]-b[0]-lo)
		round := a.next()
		if err := a.claim(k, round, readAfter, true, true); err != nil {
			return err
		}
		toSlot(&a.in, data[T](a, me, round, n), buf[b[me]+lo:b[me]+lo+n])
		a.publish(me, round)
		err := a.asReady(k, round,
			func(r int) *signal { return &a.head(r, round).part },
			func(r int) { copy(buf[b[r]+lo:b[r]+lo+n], data[T](a, r, round, n)) })
		if err != nil {
			return err
		}
	}
	return nil
}

// sharedReduceScatter reduces send into every rank's block of b, a piece
// of every block a round: every rank writes the round's piece of each
// other block into its slot, block q's at q*m, and reduces the others'
// pieces of its own block into its own, in recv. A round is half a
// scatter round of the all-reduce: no reduced block goes back.
func sharedReduceScatter[T spmd.Number](k *call, send, recv []T, b []int, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil {
		if err == nil {
			k.fellBack(topo.Ring)
			err = ringReduceScatterTo(k, send, recv, b, op)
		}
		return err
	}
	p, me := a.p, k.cc.Rank()
	m := max(1, topo.SharedChunk/sizeOf[T]()/p) // elements of each block a round
	longest := b[1] - b[0]                      // Block puts the longer blocks first
	for lo := 0; lo < longest; lo += m {
		// A rank whose block is shorter may have no piece in the last
		// round: it reads nothing then, and so does not see every rank
		// store the round, and the next round that writes waits for them.
		n := max(0, min(m, b[me+1]-b[me]-lo))
		round := a.next()
		if err := a.claim(k, round, readAfter, n > 0, true); err != nil {
			return err
		}
		slot := data[T](a, me, round, p*m)
		for q := range p {
			if c := min(m, b[q+1]-b[q]-lo); c > 0 && q != me {
				toSlot(&a.in, slot[q*m:q*m+c], send[b[q]+lo:b[q]+lo+c])
			}
		}
		a.publish(me, round)
		if n == 0 {
			continue
		}
		acc := recv[lo : lo+n]
		copy(acc, send[b[me]+lo:b[me]+lo+n]) // recv may be this very block
		if err := reduceOthers(k, a, round, p*m, me*m, op, acc); err != nil {
			return err
		}
	}
	return nil
}

// sharedAllToAll moves block j of every rank's send into block i of rank
// j's recv (i the sender), a piece of every block a round, as the
// reduce-scatter's rounds lay them out: every rank writes the round's
// piece of each block for another rank into its slot, block q's at q*m,
// and copies the pieces meant for it out of the others' slots as they
// come. Its own block is already in place.
func sharedAllToAll[T spmd.Number](k *call, send, recv []T, kk int) error {
	a, err := areaOf(k)
	if a == nil {
		if err == nil {
			k.fellBack(topo.Linear)
			err = pairwiseAllToAll(k, send, recv, kk)
		}
		return err
	}
	p, me := a.p, k.cc.Rank()
	m := max(1, topo.SharedChunk/sizeOf[T]()/p) // elements of each block a round
	for lo := 0; lo < kk; lo += m {
		c := min(m, kk-lo)
		round := a.next()
		if err := a.claim(k, round, readAfter, true, true); err != nil {
			return err
		}
		slot := data[T](a, me, round, p*m)
		for q := range p {
			if q != me {
				toSlot(&a.in, slot[q*m:q*m+c], send[q*kk+lo:q*kk+lo+c])
			}
		}
		a.publish(me, round)
		err := a.asReady(k, round,
			func(r int) *signal { return &a.head(r, round).part },
			func(r int) { copy(recv[r*kk+lo:r*kk+lo+c], data[T](a, r, round, p*m)[me*m:me*m+c]) })
		if err != nil {
			return err
		}
	}
	return nil
}
