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
// it has stored s-1; in a broadcast round, where the others read the
// root's data and then store the number, once it has stored s-2. The
// wait is free when this rank saw every rank store s-1 in round s-1, as
// every round but a broadcast's makes it (claim).
//
// A round costs a cache line from every rank instead of lg p messages, each
// of which passes the matching engine and a transport's ring; on a host with
// more ranks than cores, each rank has to run once per round, not once per
// message.
//
// Broadcasts of up to topo.SharedCell bytes take a ring of cells instead
// (cellBcast), so that a root runs up to topo.SharedCells broadcasts
// ahead.

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

// Broadcasts of up to topo.SharedCell bytes go through a ring of
// topo.SharedCells cells instead of the slots, behind them in the area,
// followed by a cache line per rank that counts the cell broadcasts the
// rank is done with. The root writes cell s mod SharedCells and goes on;
// it waits only to write a cell that a rank has not read yet, SharedCells
// broadcasts ago. So a root that broadcasts again and again runs as far
// ahead of the others as a message algorithm's root does through the
// transports' rings, where the slots held it to one round ahead.
const (
	headSize   = int(unsafe.Sizeof(slotHead{}))
	cellStride = headSize + topo.SharedCell
)

// areaSize is the size of the shared area of a communicator of p ranks.
func areaSize(p int) int { return 2*p*slotStride + topo.SharedCells*cellStride + p*headSize }

// area is a communicator's shared memory laid out in slots, and the rounds
// this rank has run in it.
type area struct {
	mem    []byte
	rounds uint32
	// Of the last two rounds, by parity: what kind each was, and whether
	// this rank saw every rank store its number.
	kind   [2]roundKind
	synced [2]bool
	casts  uint32 // the cell broadcasts this rank has run
	p      int
	todo   []int // the other ranks, for asReady
}

// roundKind is how the ranks read a round's data, which says when they are
// done with it.
type roundKind uint8

const (
	noData     roundKind = iota // a barrier
	readAfter                   // the ranks store the number, then read: done at the next round's
	readBefore                  // the ranks read, then store the number: done at this round's
)

// areaOf returns the area of k's communicator, mapping it on first use,
// or nil when its ranks cannot share memory (spmd.Comm.Shares): then the
// Shared algorithms run message algorithms instead (recursive doubling, a
// tree for broadcast), as the hierarchical ones run on a single host, so
// that GORUN_ALGO=shared serves a job of several hosts too. Every rank of
// the communicator gets the same answer. The area takes 2 slots of
// topo.SharedChunk bytes per rank and the cells (areaSize): 4.5 MiB for
// 8 ranks, of which a call touches only the pages it uses.
func areaOf(k *call) (*area, error) {
	st := k.st
	a := st.area.Load()
	if a == nil {
		st.mu.Lock()
		defer st.mu.Unlock()
		if a = st.area.Load(); a == nil {
			a = &area{todo: make([]int, 0, k.cc.Size()), p: k.cc.Size()}
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

// cellOff is the offset of the cell of cell broadcast s in the area.
func (a *area) cellOff(s uint32) int {
	return 2*a.p*slotStride + int(s%topo.SharedCells)*cellStride
}

// cell returns the header of the cell of cell broadcast s; the part
// signal says which broadcast's data it holds.
func (a *area) cell(s uint32) *slotHead {
	return (*slotHead)(unsafe.Pointer(&a.mem[a.cellOff(s)]))
}

// cellData returns n elements of the data of the cell of cell broadcast s.
func cellData[T spmd.Number](a *area, s uint32, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(&a.mem[a.cellOff(s)+headSize])), n)
}

// castsDone returns the signal of rank r that counts the cell broadcasts
// it is done with.
func (a *area) castsDone(r int) *signal {
	off := 2*a.p*slotStride + topo.SharedCells*cellStride + r*headSize
	return &(*slotHead)(unsafe.Pointer(&a.mem[off])).part
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
		want := round - 1
		if a.kind[cur] == readBefore {
			want = round - 2
		}
		for r := range k.cc.Size() {
			if r != k.cc.Rank() {
				if err := a.await(k, r, want); err != nil {
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

// sharedBcast copies root's buf into every rank's, topo.SharedChunk bytes
// a round: root writes its slot, the others copy out of it and store the
// round's number in their own header to say they have. The root waits for
// nobody, and writes the next round into its other slot at once.
func sharedBcast[T spmd.Number](k *call, buf []T, root int) error {
	a, err := areaOf(k)
	if a == nil || err != nil {
		if err == nil {
			err = treeBcast(k, buf, root, phaseMain)
		}
		return err
	}
	if len(buf)*sizeOf[T]() <= topo.SharedCell {
		return cellBcast(k, a, buf, root)
	}
	me := k.cc.Rank()
	per := topo.SharedChunk / sizeOf[T]()
	for lo := 0; lo < len(buf); lo += per {
		part := buf[lo:min(lo+per, len(buf))]
		round := a.next()
		if err := a.claim(k, round, readBefore, false, me == root); err != nil {
			return err
		}
		if me == root {
			copy(data[T](a, me, round, len(part)), part)
		} else {
			if err := a.await(k, root, round); err != nil {
				return err
			}
			copy(part, data[T](a, root, round, len(part)))
		}
		a.publish(me, round)
	}
	return nil
}

// cellBcast is a broadcast of up to topo.SharedCell bytes through the
// cells: the root waits until every rank is done with the broadcast that
// last used the cell (at once unless one lags SharedCells broadcasts
// behind), writes it and goes on; the others copy it out. Every rank then
// counts the broadcast done.
func cellBcast[T spmd.Number](k *call, a *area, buf []T, root int) error {
	me := k.cc.Rank()
	a.casts++
	s := a.casts
	if me == root {
		// Before the first SharedCells broadcasts the count wraps below
		// zero, which every rank has reached.
		for r := range a.p {
			if r != me {
				if err := a.castsDone(r).wait(k, r, s-topo.SharedCells); err != nil {
					return err
				}
			}
		}
		copy(cellData[T](a, s, len(buf)), buf)
		a.cell(s).part.store(s)
	} else {
		if err := a.cell(s).part.wait(k, root, s); err != nil {
			return err
		}
		copy(buf, cellData[T](a, s, len(buf)))
	}
	a.castsDone(me).store(s)
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
