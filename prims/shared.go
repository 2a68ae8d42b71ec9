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
// Rounds alternate between the two slots, and that is all the flow
// control they need: a rank writes round s+2 into the slot of round s only
// after round s+1 completed, which needs every rank's part of s+1, which
// each rank published only after it had read everything of round s.
//
// A round costs a cache line from every rank instead of lg p messages, each
// of which passes the matching engine and a transport's ring; on a host with
// more ranks than cores, each rank has to run once per round, not once per
// message.

// slotHead is the header of a slot: the last round whose part is in it, the
// last whose reduced block is, and how many ranks sleep waiting for either
// to change (spmd.Comm.WaitShared).
type slotHead struct {
	round, roundSleepers     atomic.Uint32
	reduced, reducedSleepers atomic.Uint32
	_                        [48]byte
}

const slotStride = int(unsafe.Sizeof(slotHead{})) + topo.SharedChunk

// area is a communicator's shared memory laid out in slots, and the rounds
// this rank has run in it.
type area struct {
	mem    []byte
	rounds uint32
}

// areaOf returns the area of k's communicator, mapping it on first use,
// or nil when its ranks cannot share memory (spmd.Comm.Shares): then the
// Shared algorithms run recursive doubling instead, as the hierarchical
// ones run on a single host, so that GORUN_ALGO=shared serves a job of
// several hosts too. Every rank of the communicator gets the same answer.
func areaOf(k *call) (*area, error) {
	st := k.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.area == nil {
		st.area = &area{}
		if k.cc.Shares() {
			mem, err := k.cc.Shared(2 * k.cc.Size() * slotStride)
			if err != nil {
				st.area = nil
				return nil, err
			}
			st.area.mem = mem
		}
	}
	if st.area.mem == nil {
		return nil, nil
	}
	return st.area, nil
}

func (a *area) head(r int, round uint32) *slotHead {
	return (*slotHead)(unsafe.Pointer(&a.mem[(2*r+int(round&1))*slotStride]))
}

// data returns n elements of the data of r's slot for round.
func data[T spmd.Number](a *area, r int, round uint32, n int) []T {
	off := (2*r+int(round&1))*slotStride + int(unsafe.Sizeof(slotHead{}))
	return unsafe.Slice((*T)(unsafe.Pointer(&a.mem[off])), n)
}

// next starts a round.
func (a *area) next() uint32 {
	a.rounds++
	return a.rounds
}

// publish says that this rank's part of round is in its slot.
func (a *area) publish(me int, round uint32) {
	h := a.head(me, round)
	h.round.Store(round)
	if h.roundSleepers.Load() != 0 {
		spmd.WakeShared(&h.round)
	}
}

// await waits for rank r's part of round.
func (a *area) await(k *call, r int, round uint32) error {
	h := a.head(r, round)
	return k.cc.WaitShared(k.ctx, r, &h.round, &h.roundSleepers, round)
}

// publishReduced says that this rank's reduced block of round is in its slot.
func (a *area) publishReduced(me int, round uint32) {
	h := a.head(me, round)
	h.reduced.Store(round)
	if h.reducedSleepers.Load() != 0 {
		spmd.WakeShared(&h.reduced)
	}
}

// awaitReduced waits for rank r's reduced block of round.
func (a *area) awaitReduced(k *call, r int, round uint32) error {
	h := a.head(r, round)
	return k.cc.WaitShared(k.ctx, r, &h.reduced, &h.reducedSleepers, round)
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

// sharedFold is a round in which every rank folds all the parts in rank
// order, (p0 op p1) op p2 ..., so that all get the same bits whatever the
// op: one wait per rank, (p-1)n elements reduced by each.
func sharedFold[T spmd.Number](k *call, a *area, out []T, op Op[T]) error {
	p, me := k.cc.Size(), k.cc.Rank()
	round := a.next()
	copy(data[T](a, me, round, len(out)), out)
	a.publish(me, round)
	for r := range p {
		if r != me {
			if err := a.await(k, r, round); err != nil {
				return err
			}
		}
		switch {
		case r == 0 && me != 0:
			copy(out, data[T](a, 0, round, len(out)))
		case r != 0:
			op.reduce(out, data[T](a, r, round, len(out)))
		}
	}
	return nil
}

// sharedScatter is a round in which rank r folds only block r of the parts
// (Block's cut), in rank order, and leaves it in its own slot in place of
// its part, where every rank copies it from: two waits per rank, n
// elements reduced by each rank in all.
func sharedScatter[T spmd.Number](k *call, a *area, out []T, op Op[T]) error {
	p, me := k.cc.Size(), k.cc.Rank()
	round := a.next()
	n := len(out)
	copy(data[T](a, me, round, n), out)
	a.publish(me, round)
	lo, hi := Block(n, p, me)
	acc := out[lo:hi]
	for r := range p {
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
	copy(data[T](a, me, round, n)[lo:hi], acc)
	a.publishReduced(me, round)
	for r := range p {
		if r == me {
			continue
		}
		if err := a.awaitReduced(k, r, round); err != nil {
			return err
		}
		rlo, rhi := Block(n, p, r)
		copy(out[rlo:rhi], data[T](a, r, round, n)[rlo:rhi])
	}
	return nil
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
