package prims

import (
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// SegmentBytes is the size of the messages ring algorithms cut large
// blocks into, so that receiving one segment overlaps reducing the
// previous one and forwarding it; their costs (ringAllReduceCost,
// chainCost) are modelled with it.
// Measured with collbench, ring all-reduce at np 2, 4-64 MiB, alternating
// builds: over shared memory (single copy) 1 MiB segments ran 64 MiB at
// 1.26-1.84 GB/s busbw against 256 KiB's 1.08-1.19 (4 runs; 16 MiB
// 1.33-1.99 against 0.76-1.46, 3 of 4 ahead), and over TCP 0.89-1.12
// against 0.75-0.98 at 64 MiB and 0.67-0.83 against 0.50-0.76 at 4 MiB
// (3 runs). Each segment costs a message (a rendezvous, over shared
// memory) that larger ones amortise. An older measurement over net/mem (4
// ranks, 2 shared cores) had 128-512 KiB ahead of 32 KiB.
const SegmentBytes = 1 << 20

// windowBytes is the least scratch the ring reduce-scatter keeps posted in
// segment receives ahead of the one it is reducing, and maxWindowBytes the
// most. In its first step every rank sends a whole block at once, so the
// receiver posts a block's worth of segments, up to maxWindowBytes: a
// segment that arrives before its receive is posted costs spmd a buffer
// and a copy over TCP (with 8 of 256 KiB posted, 16 MiB all-reduces over
// TCP spent 12% of their cycles on those). A segment its receiver copies
// out of the sender's memory (shared memory's single copy) waits there
// for its receive instead, so from such a peer only windowBytes are
// posted: the slots are reused while they are still in cache, and the
// reduction reads them from there. Ring all-reduce at np 2, 4 alternating
// runs, busbw against a block's worth: 16 MiB 2.17-2.59 GB/s against
// 1.90-2.44, 32 MiB 2.07-2.60 against 1.97-2.43.
const (
	windowBytes    = 2 << 20
	maxWindowBytes = 32 << 20
)

// ringWalk enumerates, in order, the segments a rank receives (or sends)
// in a ring over blocks [b[i], b[i+1]): steps 0..steps-1, the block of
// step s being (first - s) mod p, each block cut into segments of at most
// seg elements.
type ringWalk struct {
	b            []int
	p, first     int
	seg, steps   int
	step, lo, hi int // current step and what is left of its block
}

func newWalk(b []int, first, steps, seg int) ringWalk {
	w := ringWalk{b: b, p: len(b) - 1, first: first, seg: seg, steps: steps, step: -1}
	return w
}

// next returns the next segment and the step it belongs to.
func (w *ringWalk) next() (lo, hi, step int, ok bool) {
	for w.lo >= w.hi {
		w.step++
		if w.step >= w.steps {
			return 0, 0, 0, false
		}
		blk := mod(w.first-w.step, w.p)
		w.lo, w.hi = w.b[blk], w.b[blk+1]
		if w.lo == w.hi {
			return w.lo, w.lo, w.step, true // an empty block is one empty message
		}
	}
	lo, hi = w.lo, min(w.lo+w.seg, w.hi)
	w.lo = hi
	return lo, hi, w.step, true
}

func segElems[T spmd.Number]() int { return max(1, SegmentBytes/sizeOf[T]()) }

// pulledSegments reports whether peer copies a segment of T straight out
// of the sender's memory (shared memory's single copy), so that a segment
// sent before its receive is posted waits there: such peers need only a
// window of windowBytes posted.
func pulledSegments[T spmd.Number](cc *spmd.Comm, peer int) bool {
	n := cc.SingleCopy(peer)
	return n > 0 && segElems[T]()*sizeOf[T]() >= n
}

// ringReduceScatter reduces buf around the ring in place, over the blocks
// of b. Afterwards this rank holds block own fully reduced, where own is
// the same function of the rank on every rank (own = rank+shift mod p);
// the other blocks hold partial results. Each received segment is reduced
// and forwarded at once while the next ones arrive.
func ringReduceScatter[T spmd.Number](k *call, buf []T, b []int, own int, op Op[T], tag int) error {
	cc, ctx := k.cc, k.ctx
	p := cc.Size()
	right, left := mod(cc.Rank()+1, p), mod(cc.Rank()-1, p)
	seg := segElems[T]()
	sends, recvs := newPending(), newPending()
	defer sends.free()
	defer recvs.free()

	first := newWalk(b, own-1, 1, seg) // step 0 sends block own-1 as it is
	for lo, hi, _, ok := first.next(); ok; lo, hi, _, ok = first.next() {
		sends.isend(ctx, cc, right, tag, spmd.Bytes(buf[lo:hi]))
	}
	win := max(1, windowBytes/SegmentBytes)
	longest := 0
	for i := 0; i+1 < len(b); i++ {
		longest = max(longest, b[i+1]-b[i])
	}
	if !pulledSegments[T](cc, left) {
		win = max(win, min(maxWindowBytes/SegmentBytes, (longest+seg-1)/seg))
	}
	// A slot holds a segment, or a whole block when blocks are smaller.
	stride := min(seg, longest)
	slots := borrow[T](k, win*stride)
	post, take := newWalk(b, own-2, p-1, seg), newWalk(b, own-2, p-1, seg)
	for i := 0; i < win; i++ {
		if lo, hi, _, ok := post.next(); ok {
			recvs.irecv(cc, left, tag, spmd.Bytes(slots[i*stride:i*stride+hi-lo]))
		}
	}
	for i := 0; ; i++ {
		lo, hi, step, ok := take.next()
		if !ok {
			break
		}
		if err := recvs.wait(ctx, i); err != nil {
			return err
		}
		slot := slots[(i%win)*stride:]
		op.reduce(buf[lo:hi], slot[:hi-lo])
		if plo, phi, _, ok := post.next(); ok {
			recvs.irecv(cc, left, tag, spmd.Bytes(slot[:phi-plo]))
		}
		if step < p-2 {
			sends.isend(ctx, cc, right, tag, spmd.Bytes(buf[lo:hi]))
		}
	}
	recvs.reset()
	return sends.waitAll(ctx)
}

// ringAllGather circulates the blocks of b around the ring in place: this
// rank starts with block own (the same function of the rank on every rank)
// and ends with all. Segments are received straight into buf and
// forwarded as they arrive. src, when set, holds block own, which is
// then sent from there and copied into buf while it travels (as in
// linearAllGather), after the receives are posted; else the block is in
// buf already. With two ranks, which forward nothing, a block is one
// message, as linearAllGather sends it. np 2 on 2 cores, collbench, ring
// against linear, medians of 5 rounds in turns, 3 runs, before -> after:
// 8 MiB 351-400 us against 303-307 -> 329-336 against 302-314, 16 MiB
// 1150-1201 against 856-930 -> 923-1029 against 906-1008.
func ringAllGather[T spmd.Number](k *call, buf []T, b []int, own int, src []T, tag int) error {
	cc, ctx := k.cc, k.ctx
	p := cc.Size()
	right, left := mod(cc.Rank()+1, p), mod(cc.Rank()-1, p)
	seg := segElems[T]()
	if p == 2 {
		// Nothing is forwarded: segments would only add rendezvous.
		seg = max(1, len(buf))
	}
	sends, recvs := newPending(), newPending()
	defer sends.free()
	defer recvs.free()

	first := newWalk(b, own, 1, seg)
	for lo, hi, _, ok := first.next(); ok; lo, hi, _, ok = first.next() {
		from := buf[lo:hi]
		if src != nil {
			from = src[lo-b[own] : hi-b[own]]
		}
		sends.isend(ctx, cc, right, tag, spmd.Bytes(from))
	}
	// Every segment's receive is posted at once; the same walk again
	// forwards them as they arrive.
	post, take := newWalk(b, own-1, p-1, seg), newWalk(b, own-1, p-1, seg)
	for lo, hi, _, ok := post.next(); ok; lo, hi, _, ok = post.next() {
		recvs.irecv(cc, left, tag, spmd.Bytes(buf[lo:hi]))
	}
	if src != nil {
		copyIn(buf[b[own]:b[own+1]], src)
	}
	for i := 0; ; i++ {
		lo, hi, step, ok := take.next()
		if !ok {
			break
		}
		if err := recvs.wait(ctx, i); err != nil {
			return err
		}
		if step < p-2 {
			sends.isend(ctx, cc, right, tag, spmd.Bytes(buf[lo:hi]))
		}
	}
	recvs.reset()
	return sends.waitAll(ctx)
}

// ringCost is p-1 steps in which every rank sends a block of b bytes to
// its right neighbour and reduces red bytes of what it receives, as
// ringReduceScatter (red = b) and ringAllGather (red = 0) run them.
func ringCost(m topo.Model, s topo.Shape, b, red float64) float64 {
	cross := s.Hosts > 1
	return float64(s.P-1) * m.Step(s, cross, b, red, 2*s.PerHost, s.PerHost)
}

// ringMessages is how many messages a ring reduce-scatter or all-gather of
// p ranks sends: p-1 steps of p messages.
func ringMessages(p int) float64 {
	P := float64(p)
	return P * (P - 1)
}
