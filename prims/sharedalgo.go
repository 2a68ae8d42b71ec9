package prims

import (
	"math"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// The Shared algorithms, round by round in the area that shared.go lays
// out, and their costs: rounds in which every rank stores a round's number
// and waits for the others', and copies.

// sharedLatency is the latency of one wait of a Shared algorithm, in
// which every rank stores a word and waits for the others' (a cache line
// from every rank, no message), as a fraction of the alpha of a message
// over the Local link.
const sharedLatency = 0.5

// sharedCost is a Shared algorithm's cost on the ranks of s: body(wait)
// for n bytes, wait being one wait's, and one wait for none; never unless
// the ranks are on one host and share memory (topo.Layout.Shared).
func sharedCost(m topo.Model, s topo.Shape, n float64, body func(wait float64) float64) estimate {
	if !s.Layout.Shared || s.Hosts > 1 {
		return never
	}
	wait := sharedLatency * m.Handoff(s, s.PerHost)
	if n == 0 {
		return estimate{rounds: wait}
	}
	return estimate{rounds: body(wait)}
}

// sharedRounds is the cost of n bytes in rounds of up to sharedChunk
// bytes, round(c) that of a round of c bytes.
func sharedRounds(n float64, round func(c float64) float64) float64 {
	full := math.Floor(n / sharedChunk)
	t := full * round(sharedChunk)
	if rest := n - full*sharedChunk; rest > 0 {
		t += round(rest)
	}
	return t
}

// sharedCopy is the seconds per byte of the copies of a Shared algorithm's
// round, which every rank makes at once.
func sharedCopy(m topo.Model, s topo.Shape) float64 { return m.Local.Beta * m.Share(s.PerHost) }

// fallBack is a Shared algorithm's call when areaOf gives it no area:
// err, where mapping the memory failed, or else run, algo instead, the
// ranks being unable to share memory; the call's errors and its record in
// the trace then name the algorithm that ran.
func (k *call) fallBack(err error, algo topo.Algo, run func() error) error {
	if err != nil {
		return err
	}
	k.algo = algo
	if k.tr != nil {
		k.tr.e.Algo = k.tr.rec.Intern(string(algo))
	}
	return run()
}

// sharedScatterMin is the size of a round of a Shared all-reduce from which
// each rank reduces one block of the parts and copies the others' reduced
// blocks (two waits, sharedScatter) instead of reducing all of every part
// (one wait, sharedFold), on a crowded host and at the most; the folds'
// slots hold that much. collbench on 2 cores, 5 runs, fold against
// scatter: np 4 2 KiB 12 us against 14, 8 KiB 20 against 18; np 8 26
// against 38, 44 against 41.
const sharedScatterMin = 8 << 10

// sharedScatterFrom is the size from which a Shared all-reduce of p ranks
// scatters: sharedScatterMin on a host with more ranks than cores, else
// 64 KiB/p^2 between 1 KiB and sharedScatterMin. A fold has every rank
// read all p parts, so it loses to the scatter's second wait sooner the
// more ranks there are, when each has a core. On 16 cores (collbench, 3
// runs in turns, fold against scatter): np 16 1 KiB 6.6 us against 5.2,
// 2 KiB 9.2 against 5.5, 4 KiB 13.8 against 7.2 (Open MPI 8.2, 10.9,
// 14.8); np 8 1 KiB 4.0 against 2.6, 4 KiB 7.1 against 4.5; np 4 1-2 KiB
// 1.6-2.4 against 1.7-2.6, 4 KiB 3.9 against 3.5. np 2 on 2 cores (5
// runs): the fold 1.2-1.4x faster at 1-4 KiB, even at 8 KiB. Every rank
// must get the same answer: p is the communicator's, and cores the
// host's (contract.HostCPUs, which gorun sets alike for a host's ranks).
func sharedScatterFrom(p, cores int) int {
	if p > cores {
		return sharedScatterMin
	}
	return min(sharedScatterMin, max(1<<10, (64<<10)/(p*p)))
}

// sharedAllReduce reduces buf in rounds of up to sharedChunk bytes:
// folds below sharedScatterFrom bytes, where a round's latency counts
// most, and scatters from there, where the reductions do.
func sharedAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.RecursiveDoubling, func() error { return recdblAllReduce(k, buf, op) })
	}
	per := sharedChunk / sizeOf[T]()
	for lo := 0; lo < len(buf); lo += per {
		out := buf[lo:min(lo+per, len(buf))]
		if len(out)*sizeOf[T]() < a.scatterFrom {
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

// sharedAllReduceCost is sharedAllReduce's, round by round.
func sharedAllReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	return sharedCost(m, s, n, func(wait float64) float64 {
		return sharedRounds(n, func(c float64) float64 { return sharedRoundCost(m, s, c, wait) })
	})
}

// sharedRoundCost is one round of c bytes of a Shared all-reduce, in
// which every rank at once either copies its part in and reduces the
// other p-1 parts (sharedFold), or copies in the blocks of its part that
// the others reduce, reduces its own block of every part, copies the
// result in and the other blocks' results out (sharedScatter, two waits).
//
// On a host with a core for every rank, the copies into the shared memory
// (the blocks of its part that the others reduce, and its result) are a
// rank's own writes of a round that stays in its cache, and cost about
// what a reduction does; only the copies out of the others' blocks pay
// the link's Beta. Charging Beta for every byte, as on a crowded host
// (where it times the rounds within 5%), made the model price the Shared
// all-reduce at twice its measured time with 2 ranks on 2 cores (8 MiB:
// 2.7 ms modelled, 1.16 measured; the ring 1.83 modelled, 2.49 measured),
// so that it chose the ring from 512 KiB, at 1.2-2.7x the Shared
// algorithm's time; on a 16-core machine the Shared all-reduce took
// 0.3-0.6x the ring's at 64 KiB to 4 MiB with 4 and 8 ranks too.
func sharedRoundCost(m topo.Model, s topo.Shape, c, wait float64) float64 {
	b, g, p := sharedCopy(m, s), m.GammaBusy(s.PerHost), float64(s.P)
	if c < float64(sharedScatterFrom(s.P, m.Cores)) {
		return wait + c*b + (p-1)*c*g
	}
	if s.PerHost <= m.Cores {
		return 2*wait + c*g + (p-1)/p*c*b + (p-1)/p*c*g
	}
	return 2*wait + (2*p-1)/p*c*b + (p-1)/p*c*g
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
	a.publish(k, me, round)
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
			if err := a.awaitPart(k, r, round); err != nil {
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
		if err := a.awaitPart(k, r, round); err != nil {
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
	round, slot, lo, hi, err := scatterIn(k, a, out)
	if err != nil {
		return err
	}
	acc := out[lo:hi]
	if err := reduceOthers(k, a, round, len(out), lo, op, acc); err != nil {
		return err
	}
	toSlot(&a.in, slot[lo:hi], acc)
	a.head(k.cc.Rank(), round).reduced.store(round)
	return reducedOut(k, a, round, out)
}

// reducedOut copies the other ranks' reduced blocks of round into out, as
// each comes.
func reducedOut[T spmd.Number](k *call, a *area, round uint32, out []T) error {
	p, n := k.cc.Size(), len(out)
	return a.asReady(k, round,
		func(r int) *signal { return &a.head(r, round).reduced },
		func(r int) {
			rlo, rhi := Block(n, p, r)
			copy(out[rlo:rhi], data[T](a, r, round, n)[rlo:rhi])
		})
}

// scatterIn starts a round in which every rank reduces its own block of
// the parts, [lo, hi) of part by Block's cut: it writes the other blocks
// of part into this rank's slot and says so.
func scatterIn[T spmd.Number](k *call, a *area, part []T) (round uint32, slot []T, lo, hi int, err error) {
	lo, hi = Block(len(part), k.cc.Size(), k.cc.Rank())
	round = a.next()
	if err := a.claim(k, round, readAfter, true, true); err != nil {
		return 0, nil, 0, 0, err
	}
	slot = data[T](a, k.cc.Rank(), round, len(part))
	toSlot(&a.in, slot[:lo], part[:lo])
	toSlot(&a.in, slot[hi:], part[hi:])
	a.publish(k, k.cc.Rank(), round)
	return round, slot, lo, hi, nil
}

// sharedBarrier is one round without data.
func sharedBarrier(k *call) error {
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.RecursiveDoubling, func() error { return dissemination(k) })
	}
	me := k.cc.Rank()
	round := a.next()
	a.claim(k, round, noData, true, false) // writes nothing: no wait
	a.publish(k, me, round)
	for r := range k.cc.Size() {
		if r != me {
			if err := a.awaitPart(k, r, round); err != nil {
				return err
			}
		}
	}
	return nil
}

// sharedBarrierCost is sharedBarrier's: one wait.
func sharedBarrierCost(m topo.Model, s topo.Shape) estimate {
	return sharedCost(m, s, 0, nil)
}

// sharedAllGather gathers the blocks of b into every rank's buf,
// sharedChunk bytes of each block a round: every rank writes its
// block's piece, from own, and copies the others' out; it copies its own
// piece into buf once it has published it, while the others copy it too,
// where it used to copy the block into buf first and write its slot from
// there. np 2 on 2 cores, collbench, medians of 7 alternating runs, before
// -> after (Open MPI): 128 KiB 17.4 -> 7.5 us (9.6), 256 KiB 16.6 -> 11.0
// (13.4), 512 KiB 66 -> 39 (23), 2 MiB 200 -> 145 (112), 4 MiB 269 ->
// 233 (217); 1 MiB 70 -> 90 (53) within its noise (48-107 in the runs).
func sharedAllGather[T spmd.Number](k *call, buf []T, b []int, own []T) error {
	me := k.cc.Rank()
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.RecursiveDoubling, func() error {
			copyIn(buf[b[me]:b[me+1]], own)
			return recdblAllGather(k, buf, b)
		})
	}
	per := sharedChunk / sizeOf[T]()
	for lo := 0; lo < b[1]-b[0]; lo += per {
		n := min(per, b[1]-b[0]-lo)
		round := a.next()
		if err := a.claim(k, round, readAfter, true, true); err != nil {
			return err
		}
		toSlot(&a.in, data[T](a, me, round, n), own[lo:lo+n])
		a.publish(k, me, round)
		copyIn(buf[b[me]+lo:b[me]+lo+n], own[lo:lo+n])
		err := a.asReady(k, round,
			func(r int) *signal { return &a.head(r, round).part },
			func(r int) { copy(buf[b[r]+lo:b[r]+lo+n], data[T](a, r, round, n)) })
		if err != nil {
			return err
		}
	}
	return nil
}

// sharedAllGatherCost is sharedAllGather's: in every round every rank
// copies its block's piece in and the p-1 others' out.
func sharedAllGatherCost(m topo.Model, s topo.Shape, n float64) estimate {
	p, copyIn := float64(s.P), sharedCopy(m, s)
	return sharedCost(m, s, n, func(wait float64) float64 {
		return sharedRounds(n/p, func(c float64) float64 { return wait + p*c*copyIn })
	})
}

// sharedReduceScatter reduces send into every rank's block of b, a piece
// of every block a round: every rank writes the round's piece of each
// other block into its slot, block q's at q*m, and reduces the others'
// pieces of its own block into its own, in recv. A round is half a
// scatter round of the all-reduce: no reduced block goes back.
func sharedReduceScatter[T spmd.Number](k *call, send, recv []T, b []int, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil {
		return k.fallBack(err, topo.Ring, func() error { return ringReduceScatterTo(k, send, recv, b, op) })
	}
	p, me := a.p, k.cc.Rank()
	m := max(1, sharedChunk/sizeOf[T]()/p) // elements of each block a round
	longest := b[1] - b[0]                 // Block puts the longer blocks first
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
		a.publish(k, me, round)
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

// sharedReduceScatterCost is sharedReduceScatter's: in every round every
// rank copies the other blocks' pieces of its part in and its own into
// place, and reduces the p-1 others' into it.
func sharedReduceScatterCost(m topo.Model, s topo.Shape, n float64) estimate {
	p, copyIn, g := float64(s.P), sharedCopy(m, s), m.GammaBusy(s.PerHost)
	return sharedCost(m, s, n, func(wait float64) float64 {
		return sharedRounds(n, func(c float64) float64 { return wait + c*copyIn + (p-1)/p*c*g })
	})
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
		return k.fallBack(err, topo.Linear, func() error { return pairwiseAllToAll(k, send, recv, kk) })
	}
	p, me := a.p, k.cc.Rank()
	m := max(1, sharedChunk/sizeOf[T]()/p) // elements of each block a round
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
		a.publish(k, me, round)
		err := a.asReady(k, round,
			func(r int) *signal { return &a.head(r, round).part },
			func(r int) { copy(recv[r*kk+lo:r*kk+lo+c], data[T](a, r, round, p*m)[me*m:me*m+c]) })
		if err != nil {
			return err
		}
	}
	return nil
}

// sharedAllToAllCost is sharedAllToAll's, n being one rank's send buffer:
// a round takes a piece of each of its blocks for the others, which every
// rank copies in, and the pieces meant for it, which it copies out.
func sharedAllToAllCost(m topo.Model, s topo.Shape, n float64) estimate {
	p, copyIn := float64(s.P), sharedCopy(m, s)
	return sharedCost(m, s, n, func(wait float64) float64 {
		return sharedRounds(n, func(c float64) float64 { return wait + 2*(p-1)/p*c*copyIn })
	})
}
