package prims

import (
	"math/bits"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// fold is how p ranks, p not a power of two, run an algorithm made for pp
// = 2^floor(lg p) ranks: of the first 2*rem ranks (rem = p-pp), each even
// one hands its data to the odd one after it and sits out the core; the
// pp others are renumbered 0..pp-1 (their vrank).
type fold struct {
	p, pp, rem int
	rank       int
	vrank      int // -1 for a rank that sits out
}

func newFold(p, rank int) fold {
	pp := 1
	for pp*2 <= p {
		pp *= 2
	}
	f := fold{p: p, pp: pp, rem: p - pp, rank: rank}
	switch {
	case rank >= 2*f.rem:
		f.vrank = rank - f.rem
	case rank%2 == 1:
		f.vrank = rank / 2
	default:
		f.vrank = -1
	}
	return f
}

// real returns the rank of vrank v.
func (f fold) real(v int) int {
	if v < f.rem {
		return 2*v + 1
	}
	return v + f.rem
}

// out reports whether this rank sits out the core.
func (f fold) out() bool { return f.vrank < 0 }

// partner is the rank an extra rank (or the odd rank it pairs with)
// exchanges with around the core.
func (f fold) partner() int {
	if f.rank%2 == 0 {
		return f.rank + 1
	}
	return f.rank - 1
}

// paired reports whether this rank is one of the first 2*rem.
func (f fold) paired() bool { return f.rank < 2*f.rem }

// superBounds returns the boundaries of the pp super-blocks of the core,
// given the boundaries b of p blocks, one per rank: vrank v's super-block
// is the blocks of the ranks folded into it (2v and 2v+1, or v+rem).
func (f fold) superBounds(k *call, b []int) []int {
	sb := k.intsFor(1, f.pp+1)
	for v := 0; v < f.pp; v++ {
		first := v + f.rem
		if v < f.rem {
			first = 2 * v
		}
		sb[v] = b[first]
	}
	sb[f.pp] = b[f.p]
	return sb
}

// halve is the recursive-halving reduce-scatter of the core: over lg pp
// steps each vrank swaps half of what it still reduces with the partner at
// distance pp/2, pp/4, ..., 1, and ends holding super-block vrank of sb
// fully reduced in buf. tmp must hold half of buf.
func halve[T spmd.Number](k *call, f fold, buf, tmp []T, sb []int, op Op[T]) error {
	lo, hi := 0, f.pp
	for step, mask := 0, f.pp/2; mask > 0; step, mask = step+1, mask/2 {
		peer := f.real(f.vrank ^ mask)
		mid := lo + (hi-lo)/2
		keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
		if f.vrank&mask != 0 {
			keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
		}
		keep, send := buf[sb[keepLo]:sb[keepHi]], buf[sb[sendLo]:sb[sendHi]]
		if err := swapReduce(k, send, keep, tmp, peer, tag(k.coll, phaseStep+step), op); err != nil {
			return err
		}
		lo, hi = keepLo, keepHi
	}
	return nil
}

// swapReduce sends send to peer and reduces into keep what peer sends in
// return (its own send, as long as keep), received through tmp, which
// holds keep. From a peer that copies segments straight out of our memory
// (shared memory's single copy) the halves go in segments, received into
// a few slots of tmp that are reused while still in cache, each reduced as
// it arrives: a whole half copied into tmp and then reduced made the
// reduction read it back from memory. Elsewhere one message each way.
func swapReduce[T spmd.Number](k *call, send, keep, tmp []T, peer, tag int, op Op[T]) error {
	cc, ctx := k.cc, k.ctx
	seg := segElems[T]()
	win := max(1, windowBytes/SegmentBytes)
	if !pulledSegments[T](cc, peer) || len(keep) <= win*seg {
		t := tmp[:len(keep)]
		if err := exchange(ctx, cc, send, peer, t, peer, tag); err != nil {
			return err
		}
		op.reduce(keep, t)
		return nil
	}
	sends, recvs := newPending(), newPending()
	defer sends.free()
	defer recvs.free()
	for lo := 0; lo < len(send); lo += seg {
		sends.isend(ctx, cc, peer, tag, spmd.Bytes(send[lo:min(lo+seg, len(send))]))
	}
	pieces := (len(keep) + seg - 1) / seg
	piece := func(i int) (lo, hi int) { return i * seg, min((i+1)*seg, len(keep)) }
	slot := func(i int) []T {
		lo, hi := piece(i)
		return tmp[(i%win)*seg:][:hi-lo]
	}
	for i := 0; i < win; i++ {
		recvs.irecv(cc, peer, tag, spmd.Bytes(slot(i)))
	}
	for i := 0; i < pieces; i++ {
		if err := recvs.wait(ctx, i); err != nil {
			return err
		}
		lo, hi := piece(i)
		op.reduce(keep[lo:hi], slot(i))
		if i+win < pieces {
			recvs.irecv(cc, peer, tag, spmd.Bytes(slot(i+win)))
		}
	}
	recvs.reset()
	return sends.waitAll(ctx)
}

// double is the recursive-doubling allgather of the core: each vrank
// starts with super-block vrank of sb in buf and, over lg pp steps at
// distance 1, 2, ..., pp/2, swaps everything it has with its partner,
// received in place.
func double[T spmd.Number](k *call, f fold, buf []T, sb []int, phase int) error {
	lo, hi := f.vrank, f.vrank+1
	for step, mask := 0, 1; mask < f.pp; step, mask = step+1, mask*2 {
		peer := f.real(f.vrank ^ mask)
		plo, phi := lo+mask, hi+mask
		if f.vrank&mask != 0 {
			plo, phi = lo-mask, hi-mask
		}
		if err := exchange(k.ctx, k.cc, buf[sb[lo]:sb[hi]], peer, buf[sb[plo]:sb[phi]], peer, tag(k.coll, phase+step)); err != nil {
			return err
		}
		lo, hi = min(lo, plo), max(hi, phi)
	}
	return nil
}

// foldIn runs the fold's first exchange: an extra rank sends buf to its
// partner, which reduces it into its own buf through tmp.
func foldIn[T spmd.Number](k *call, f fold, buf, tmp []T, op Op[T]) error {
	if !f.paired() {
		return nil
	}
	t := tag(k.coll, phaseFold)
	if f.out() {
		return sendTo(k.ctx, k.cc, f.partner(), t, buf)
	}
	if err := recvFrom(k.ctx, k.cc, f.partner(), t, tmp[:len(buf)]); err != nil {
		return err
	}
	op.reduce(buf, tmp[:len(buf)])
	return nil
}

// foldOut runs the fold's last exchange: the partner sends the result back
// to the extra rank.
func foldOut[T spmd.Number](k *call, f fold, buf []T) error {
	if !f.paired() {
		return nil
	}
	t := tag(k.coll, phaseUnfold)
	if f.out() {
		return recvFrom(k.ctx, k.cc, f.partner(), t, buf)
	}
	return sendTo(k.ctx, k.cc, f.partner(), t, buf)
}

// The costs of the fold, halve and double, on the ranks of a topo.Shape.

// lg returns ceil(log2 p); pow2 the largest power of two <= p (newFold's pp).
func lg(p int) int { return bits.Len(uint(p - 1)) }

func pow2(p int) int { return 1 << (bits.Len(uint(p)) - 1) }

// foldCost is the cost of foldIn and foldOut on p ranks, p not a power of
// two: the extra ranks send n bytes (reduced by the partner when reduce)
// and get back n2 bytes at the end.
func foldCost(m topo.Model, s topo.Shape, n, n2 float64, reduce bool) float64 {
	extra := s.P - pow2(s.P)
	if extra == 0 {
		return 0
	}
	red := 0.0
	if reduce {
		red = n
	}
	busy := min(2*extra, 2*s.PerHost)
	cross := s.Hosts > 1
	return m.Step(s, cross, n, red, busy, min(extra, s.PerHost)) + m.Step(s, cross, n2, 0, busy, 0)
}

// doublingCost is recursive doubling over the pow2(p) ranks of the core:
// in round k each rank exchanges size(k) bytes with rank^(1<<k), in one
// piece, and reduces red(k) of them.
func doublingCost(m topo.Model, s topo.Shape, size, red func(k int) float64) float64 {
	q := pow2(s.P)
	busy := 2 * min(s.PerHost, q)
	t := 0.0
	for k := 0; 1<<k < q; k++ {
		b, cross := size(k), s.Layout.XorCrosses(k)
		t += m.Step(s, cross, b, red(k), busy, min(s.PerHost, q)) + m.Unsegmented(s, cross, b, busy)
	}
	return t
}

// halvingCost is halve (reduce) or, mirrored, double (not reduce) over
// the pow2(p) ranks of the core: the round at distance q/2 moves n/2
// bytes, the one at q/4 n/4, and so on.
func halvingCost(m topo.Model, s topo.Shape, n float64, reduce bool) float64 {
	q := pow2(s.P)
	return doublingCost(m, s, func(k int) float64 { return n * float64(int(1)<<k) / float64(q) },
		func(k int) float64 {
			if reduce {
				return n * float64(int(1)<<k) / float64(q)
			}
			return 0
		})
}

// doublingMessages is how many messages lg q rounds of recursive doubling
// (or halving) over the core of p ranks send, and foldMessages how many
// the fold adds: the extra ranks' data in, and their result back.
func doublingMessages(p int) float64 {
	q := pow2(p)
	return float64(q * lg(q))
}

func foldMessages(p int) float64 { return float64(2 * (p - pow2(p))) }
