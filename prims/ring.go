package prims

import (
	"github.com/gorun-hpc/gorun/spmd"
)

// SegmentBytes is the size of the messages ring algorithms cut large
// blocks into, so that receiving one segment overlaps reducing the
// previous one and forwarding it. Measured with BenchmarkAllReduce (ring,
// 4 ranks over net/mem, 2 shared cores): 32 KiB segments ran 16 MiB at
// about 550 MB/s, 128 KiB at 600-650, 256-512 KiB at 550-730 (noisy);
// smaller segments pay per-message costs that net/mem cannot hide.
// Re-measure over net/tcp, where the overlap matters more.
const SegmentBytes = 256 << 10

// window is the fewest segment receives the ring reduce-scatter keeps
// posted ahead of the one it is reducing, and maxWindow the most. In its
// first step every rank sends a whole block at once, so the receiver posts
// a block's worth of segments (up to maxWindow*SegmentBytes of scratch):
// a segment that arrives before its receive is posted costs spmd a buffer
// and a copy (with 8 posted, 16 MiB all-reduces over TCP spent 12% of
// their cycles on those).
const (
	window    = 8
	maxWindow = 128
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
	win := window
	for i := 0; i+1 < len(b); i++ {
		win = max(win, min(maxWindow, (b[i+1]-b[i]+seg-1)/seg))
	}
	slots := borrow[T](k, win*seg)
	post, take := newWalk(b, own-2, p-1, seg), newWalk(b, own-2, p-1, seg)
	for i := 0; i < win; i++ {
		if lo, hi, _, ok := post.next(); ok {
			recvs.irecv(cc, left, tag, spmd.Bytes(slots[i*seg:i*seg+hi-lo]))
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
		slot := slots[(i%win)*seg:]
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
// forwarded as they arrive.
func ringAllGather[T spmd.Number](k *call, buf []T, b []int, own int, tag int) error {
	cc, ctx := k.cc, k.ctx
	p := cc.Size()
	right, left := mod(cc.Rank()+1, p), mod(cc.Rank()-1, p)
	seg := segElems[T]()
	sends, recvs := newPending(), newPending()
	defer sends.free()
	defer recvs.free()

	first := newWalk(b, own, 1, seg)
	for lo, hi, _, ok := first.next(); ok; lo, hi, _, ok = first.next() {
		sends.isend(ctx, cc, right, tag, spmd.Bytes(buf[lo:hi]))
	}
	// Every segment's receive is posted at once; the same walk again
	// forwards them as they arrive.
	post, take := newWalk(b, own-1, p-1, seg), newWalk(b, own-1, p-1, seg)
	for lo, hi, _, ok := post.next(); ok; lo, hi, _, ok = post.next() {
		recvs.irecv(cc, left, tag, spmd.Bytes(buf[lo:hi]))
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
