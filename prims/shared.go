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
// of data each. In a round every rank copies its part into its slot, stores
// the round's number in the slot's header, and waits for every other
// rank's header to show that number, reading their parts as they come.
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

// slotHead is the header of a slot: the last round stored in it, and how
// many ranks sleep waiting for it to change (spmd.Comm.WaitShared).
type slotHead struct {
	round    atomic.Uint32
	sleepers atomic.Uint32
	_        [56]byte
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

// publish ends this rank's part of round: the data is in place.
func (a *area) publish(me int, round uint32) {
	h := a.head(me, round)
	h.round.Store(round)
	if h.sleepers.Load() != 0 {
		spmd.WakeShared(&h.round)
	}
}

// await waits for rank r's part of round.
func (a *area) await(k *call, r int, round uint32) error {
	h := a.head(r, round)
	return k.cc.WaitShared(k.ctx, r, &h.round, &h.sleepers, round)
}

// sharedAllReduce reduces buf in rounds of topo.SharedChunk bytes. Every
// rank folds the parts in rank order, (p0 op p1) op p2 ..., so that all
// get the same bits whatever the op.
func sharedAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	a, err := areaOf(k)
	if a == nil || err != nil {
		if err == nil {
			err = recdblAllReduce(k, buf, op)
		}
		return err
	}
	p, me := k.cc.Size(), k.cc.Rank()
	per := topo.SharedChunk / sizeOf[T]()
	for lo := 0; lo < len(buf); lo += per {
		out := buf[lo:min(lo+per, len(buf))]
		a.rounds++
		round := a.rounds
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
	a.rounds++
	round := a.rounds
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
