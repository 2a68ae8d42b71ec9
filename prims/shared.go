package prims

import (
	"sync/atomic"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// The Shared algorithms run on the memory that the ranks of one host share
// (spmd.Comm.Shared) instead of messages, as Open MPI's coll/sm does: each
// rank owns two slots, a cache line of header and topo.SharedChunk bytes
// of data each. A round of the algorithm goes through one slot of each
// rank.
//
// Rounds alternate between the two slots. In a round every rank stores the
// round's number in its slot's header, whether it wrote data there or
// only says that it has read what it needed. Before a rank writes data
// into its slot for round s, nobody may still read the data of round s-2
// there: in an all-reduce or an all-gather round, where every rank stores
// the number and then reads the others' data, a rank is done with s-2 once
// it has stored s-1. The wait is free when this rank saw every rank store
// s-1 in round s-1, as every such round makes it (claim).
//
// A round costs a cache line from every rank instead of lg p messages, each
// of which passes the matching engine and a transport's ring; on a host with
// more ranks than cores, each rank has to run once per round, not once per
// message.
//
// Broadcasts take rings of their own instead (castRing): up to
// topo.SharedCell bytes a ring of cells, so that a root runs up to
// topo.SharedCells broadcasts ahead, and larger ones a ring of
// topo.SharedStreams chunks, so that it runs that many chunks ahead.

// slotHead is the header of a slot: the last round whose part is in it,
// and the last whose reduced block is.
type slotHead struct {
	part, reduced signal
	_             [48]byte
}

// signal is a round number that one rank stores and others wait for, and
// how many of them sleep waiting (spmd.Comm.WaitShared).
type signal struct {
	round, sleepers atomic.Uint32
}

// store says that round has come, waking whoever sleeps on it.
func (g *signal) store(round uint32) {
	g.round.Store(round)
	if g.sleepers.Load() != 0 {
		spmd.WakeShared(&g.round)
	}
}

// reached reports whether g's owner has stored round (or a later one).
func (g *signal) reached(round uint32) bool { return int32(g.round.Load()-round) >= 0 }

// wait waits until rank r, g's owner, has stored round (or a later one).
func (g *signal) wait(k *call, r int, round uint32) error {
	return k.cc.WaitShared(k.ctx, r, &g.round, &g.sleepers, round)
}

const slotStride = headSize + topo.SharedChunk

// Broadcasts go through rings of buffers behind the slots instead, each
// ring followed by a cache line per rank that counts the pieces the rank
// is done with: the cells, topo.SharedCells of topo.SharedCell bytes, for
// broadcasts that fit one, and the streams, topo.SharedStreams of
// topo.SharedChunk bytes, for the chunks of larger ones. The root writes
// buffer s mod n and goes on; it waits only to write a buffer that a rank
// has not read yet, n pieces ago. So a root that broadcasts again and
// again runs as far ahead of the others as a message algorithm's root does
// through the transports' rings, where the slots held it to one round
// ahead.
const (
	headSize   = int(unsafe.Sizeof(slotHead{}))
	cellStride = headSize + topo.SharedCell
)

// castRing is where a ring of broadcast buffers sits in the area.
type castRing struct {
	off, stride int    // the first buffer, and the distance between buffers
	n           uint32 // buffers
	done        int    // the cache lines that count the pieces each rank is done with
}

// rings returns the cells' and the streams' rings of an area of p ranks,
// and the size of the area.
func rings(p int) (cells, streams castRing, size int) {
	off := 2 * p * slotStride
	cells = castRing{off: off, stride: cellStride, n: topo.SharedCells, done: off + topo.SharedCells*cellStride}
	off = cells.done + p*headSize
	streams = castRing{off: off, stride: slotStride, n: topo.SharedStreams, done: off + topo.SharedStreams*slotStride}
	return cells, streams, streams.done + p*headSize
}

// areaSize is the size of the shared area of a communicator of p ranks.
func areaSize(p int) int {
	_, _, size := rings(p)
	return size
}

// area is a communicator's shared memory laid out in slots, and the rounds
// this rank has run in it.
type area struct {
	mem    []byte
	rounds uint32
	// Of the last two rounds, by parity: what kind each was, and whether
	// this rank saw every rank store its number.
	kind   [2]roundKind
	synced [2]bool
	// The rings of the broadcasts, and the pieces this rank has run
	// through each.
	cells, streams castRing
	casts, chunks  uint32
	p              int
	todo           []int // the other ranks, for asReady
}

// roundKind is how the ranks read a round's data, which says when they are
// done with it.
type roundKind uint8

const (
	noData    roundKind = iota // a barrier
	readAfter                  // the ranks store the number, then read: done at the next round's
)

// areaOf returns the area of k's communicator, mapping it on first use,
// or nil when its ranks cannot share memory (spmd.Comm.Shares): then the
// Shared algorithms run message algorithms instead (recursive doubling, a
// tree for broadcast), as the hierarchical ones run on a single host, so
// that GORUN_ALGO=shared serves a job of several hosts too. Every rank of
// the communicator gets the same answer. The area takes 2 slots of
// topo.SharedChunk bytes per rank, the cells and the streams (areaSize):
// 6.5 MiB for 8 ranks, of which a call touches only the pages it uses.
func areaOf(k *call) (*area, error) {
	st := k.st
	a := st.area.Load()
	if a == nil {
		st.mu.Lock()
		defer st.mu.Unlock()
		if a = st.area.Load(); a == nil {
			a = &area{todo: make([]int, 0, k.cc.Size()), p: k.cc.Size()}
			a.cells, a.streams, _ = rings(a.p)
			if k.cc.Shares() {
				mem, err := k.cc.Shared(areaSize(k.cc.Size()))
				if err != nil {
					return nil, err
				}
				a.mem = mem
			}
			st.area.Store(a)
		}
	}
	if a.mem == nil {
		return nil, nil
	}
	return a, nil
}

func (a *area) head(r int, round uint32) *slotHead {
	return (*slotHead)(unsafe.Pointer(&a.mem[(2*r+int(round&1))*slotStride]))
}

// data returns n elements of the data of r's slot for round.
func data[T spmd.Number](a *area, r int, round uint32, n int) []T {
	off := (2*r+int(round&1))*slotStride + headSize
	return unsafe.Slice((*T)(unsafe.Pointer(&a.mem[off])), n)
}

// bufOff is the offset of the buffer of piece s of ring g in the area.
func (g castRing) bufOff(s uint32) int { return g.off + int(s%g.n)*g.stride }

// head returns the header of the buffer of piece s of ring g in a; its
// part signal says which piece's data the buffer holds.
func (g castRing) head(a *area, s uint32) *slotHead {
	return (*slotHead)(unsafe.Pointer(&a.mem[g.bufOff(s)]))
}

// castData returns n elements of the data of the buffer of piece s of
// ring g in a.
func castData[T spmd.Number](a *area, g castRing, s uint32, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(&a.mem[g.bufOff(s)+headSize])), n)
}

// doneBy returns the signal of rank r that counts the pieces of ring g it
// is done with.
func (g castRing) doneBy(a *area, r int) *signal {
	return &(*slotHead)(unsafe.Pointer(&a.mem[g.done+r*headSize])).part
}

// next starts a round.
func (a *area) next() uint32 {
	a.rounds++
	return a.rounds
}

// claim starts round as one of kind, in which this rank will see every
// rank store the round's number (synced) or not. When this rank is to
// write data into its slot (write), it first waits until nobody reads the
// data of round-2 there any more.
func (a *area) claim(k *call, round uint32, kind roundKind, synced, write bool) error {
	cur, prev := round&1, (round-1)&1
	if write && !a.synced[prev] && a.kind[cur] != noData {
		for r := range k.cc.Size() {
			if r != k.cc.Rank() {
				if err := a.await(k, r, round-1); err != nil {
					return err
				}
			}
		}
	}
	a.kind[cur], a.synced[cur] = kind, synced
	return nil
}

// publish says that this rank's part of round is in its slot.
func (a *area) publish(me int, round uint32) { a.head(me, round).part.store(round) }

// await waits for rank r's part of round (or a later round's).
func (a *area) await(k *call, r int, round uint32) error {
	return a.head(r, round).part.wait(k, r, round)
}

// asReady runs do(r) for every other rank r once the signal sig(r) of r's
// slot for round has come, taking the ranks as they come, from this rank's
// successor on: it waits only when none of those left is ready. On a host
// with more ranks than cores a rank that waited for the ranks in order
// would sit idle behind one that has not had a core yet while others' data
// is there to copy. All-gather on 2 cores against in-order waits, medians
// of 5 alternating collbench runs: np 4 at 1 MiB 470 -> 414 us, 4 MiB
// 1976 -> 1772, 8 MiB 4787 -> 4322; np 8 within the noise.
func (a *area) asReady(k *call, round uint32, sig func(r int) *signal, do func(r int)) error {
	p, me := k.cc.Size(), k.cc.Rank()
	todo := a.todo[:0]
	for i := 1; i < p; i++ {
		todo = append(todo, (me+i)%p)
	}
	for len(todo) > 0 {
		left := todo[:0]
		for _, r := range todo {
			if sig(r).reached(round) {
				do(r)
			} else {
				left = append(left, r)
			}
		}
		if len(left) == len(todo) {
			r := left[0]
			if err := sig(r).wait(k, r, round); err != nil {
				return err
			}
			do(r)
			left = left[1:]
		}
		todo = left
	}
	return nil
}

// sharedAllReduce reduces buf in rounds of up to topo.SharedChunk bytes:
// folds below topo.SharedScatter bytes, where a round's latency counts
// most, and scatters from there, where the reductions do.
func sharedAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil || err != nil {
		if err == nil {
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
	copy(data[T](a, me, round, len(part)), part)
	a.publish(me, round)
	return round, nil
}

// foldParts folds elements lo to hi of every rank's part of round, n
// elements each, into acc as they come, in rank order, (p0 op p1) op p2
// ..., so that every rank that folds them gets the same bits whatever the
// op. acc holds this rank's own elements on entry.
func foldParts[T spmd.Number](k *call, a *area, round uint32, n, lo, hi int, op Op[T], acc []T) error {
	me := k.cc.Rank()
	for r := range k.cc.Size() {
		if r != me {
			if err := a.await(k, r, round); err != nil {
				return err
			}
		}
		src := data[T](a, r, round, n)[lo:hi]
		switch {
		case r == 0 && me != 0:
			copy(acc, src)
		case r != 0:
			op.reduce(acc, src)
		}
	}
	return nil
}

// sharedFold is a round in which every rank folds all the parts: one wait
// per rank, (p-1)n elements reduced by each.
func sharedFold[T spmd.Number](k *call, a *area, out []T, op Op[T]) error {
	round, err := put(k, a, out)
	if err != nil {
		return err
	}
	return foldParts(k, a, round, len(out), 0, len(out), op, out)
}

// sharedScatter is a round in which rank r folds only block r of the parts
// (Block's cut) and leaves it in its own slot in place of its part, where
// every rank copies it from: two waits per rank, n elements reduced by
// each rank in all.
func sharedScatter[T spmd.Number](k *call, a *area, out []T, op Op[T]) error {
	p, me := k.cc.Size(), k.cc.Rank()
	round, err := put(k, a, out)
	if err != nil {
		return err
	}
	n := len(out)
	lo, hi := Block(n, p, me)
	acc := out[lo:hi]
	if err := foldParts(k, a, round, n, lo, hi, op, acc); err != nil {
		return err
	}
	copy(data[T](a, me, round, n)[lo:hi], acc)
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
	if a == nil || err != nil {
		if err == nil {
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
	if a == nil || err != nil {
		if err == nil {
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
		copy(castData[T](a, g, s, len(buf)), buf)
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
	if a == nil || err != nil {
		if err == nil {
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
		copy(data[T](a, me, round, n), buf[b[me]+lo:b[me]+lo+n])
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
// block into its slot, block q's at q*m, and folds its own block's piece
// of every slot, in rank order, into recv. A round is half a scatter
// round of the all-reduce: no reduced block goes back.
func sharedReduceScatter[T spmd.Number](k *call, send, recv []T, b []int, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil || err != nil {
		if err == nil {
			work := workFor(k, send, nil)
			me := k.cc.Rank()
			if err = ringReduceScatter(k, work, b, me, op, tag(k.coll, phaseMain)); err == nil {
				copy(recv, work[b[me]:b[me+1]])
			}
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
			if c := min(m, b[q+1]-b[q]-lo); c > 0 {
				copy(slot[q*m:q*m+c], send[b[q]+lo:b[q]+lo+c])
			}
		}
		a.publish(me, round)
		if n == 0 {
			continue
		}
		if me == 0 { // foldParts starts from this rank's own piece
			copy(recv[lo:lo+n], slot[:n])
		}
		if err := foldParts(k, a, round, p*m, me*m, me*m+n, op, recv[lo:lo+n]); err != nil {
			return err
		}
	}
	return nil
}
