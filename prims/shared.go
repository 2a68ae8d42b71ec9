package prims

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/topo"
)

// The Shared algorithms run on the memory that the ranks of one host share
// (spmd.Comm.Shared) instead of messages, as Open MPI's coll/sm does: each
// rank owns two slots, a cache line of header and sharedChunk bytes
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
// sharedCell bytes a ring of cells, so that a root runs up to
// sharedCells broadcasts ahead, and larger ones a ring of
// sharedStreams chunks, so that it runs that many chunks ahead.

// slotHead is the header of a slot: the last round whose part is in it,
// and the last whose reduced block is; a part of up to inlineMax bytes
// sits in the header itself, so that a reader gets it with the cache line
// of the signal it waited on: one line crosses between the cores instead
// of two. On 2 ranks and 2 cores, collbench medians of 5 alternating
// runs: all-reduce of 8 B 0.60 us against 1.04 (Open MPI 0.53 in the same
// runs), all-gather of 8 B 0.49 against 0.87 (0.51), of 64 B 0.48 against
// 0.81 (0.58); broadcast: see castPiece.
//
// size and coll are the bytes (call.bytes, mod 2^32) and the collective of
// the call that wrote the part, which a reader checks against its own
// (call.matches): ranks that passed buffers of different lengths, or
// called different collectives, got wrong sums, or a reader took a stale
// part, and returned without an error.
type slotHead struct {
	part, reduced signal
	inline        [inlineMax]byte
	size          uint32
	coll          uint8
	_             [3]byte
}

// inlineMax is how many bytes of a part fit in its slot's header: a cache
// line less the signals, the size and the collective. It was 48 before
// those came.
const inlineMax = 40

// at returns n elements at off of a's memory: the data of a slot or cell
// whose header is at off, in the header itself when they fit there.
func at[T spmd.Number](a *area, off, n int) []T {
	if n*sizeOf[T]() <= inlineMax {
		return unsafe.Slice((*T)(unsafe.Pointer(&(*slotHead)(unsafe.Pointer(&a.mem[off])).inline)), n)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&a.mem[off+headSize])), n)
}

// signal is a round number that one rank stores and others wait for, and
// how many of them sleep waiting (spmd.Comm.WaitShared).
type signal struct {
	round, sleepers atomic.Uint32
}

// store says that round has come, waking whoever sleeps on it.
func (g *signal) store(round uint32) { spmd.PublishShared(&g.round, &g.sleepers, round) }

// reached reports whether g's owner has stored round (or a later one).
func (g *signal) reached(round uint32) bool { return int32(g.round.Load()-round) >= 0 }

// wait waits until rank r, g's owner, has stored round (or a later one).
func (g *signal) wait(k *call, r int, round uint32) error {
	if g.reached(round) {
		return nil // there already: no call, no frame for the poll
	}
	return k.cc.WaitShared(k.ctx, r, &g.round, &g.sleepers, round)
}

const slotStride = headSize + sharedChunk

// sharedChunk is how many bytes of its part a rank publishes in one round
// of a Shared algorithm (the size of its slot); a larger buffer takes
// several rounds. Against 32 KiB and 1 MiB, collbench all-reduce on 2
// cores, 3 runs: 16 MiB at np 8 34.5 ms against 41.8 and 47.0, at np 4
// 15.3 against 20.2 and 15.7.
const sharedChunk = 256 << 10

// sharedCell is the largest broadcast that the Shared algorithm sends
// through its ring of sharedCells cells, in which a root runs up to
// sharedCells broadcasts ahead of the others, instead of its two slots,
// which held the root to one broadcast ahead: there linear and tree were
// 2-3x faster than shared below 2 KiB. Broadcast on 2 cores, medians of 3
// alternating collbench runs, 2 KiB cells (slots above) against 16 KiB:
// np 4 at 4 / 8 / 16 KiB 6 / 6 / 10 us against 2 / 3 / 4 (linear 13 / 12
// / 16), np 8 12 / 14 / 18 against 5 / 5 / 7 (linear 24 / 30 / 43); at 32
// KiB, slots in both, the same.
const sharedCell = 16 << 10

// sharedCells is how many broadcasts of up to sharedCell bytes a root may
// run ahead of the slowest rank. Against 32, collbench --algo shared on 2
// cores, 3 alternating runs of 20000-100000 broadcasts: np 4 at 64 B
// 0.46-0.60 -> 0.24-0.31 us (Open MPI 0.37-0.84 in the same runs), at 16
// KiB 2.38-3.15 -> 1.76-2.09; np 8 at 64 B 0.64-1.06 -> 0.49-0.58, at 16
// KiB 3.76-4.77 -> 2.62-3.00; np 2 at 16 KiB 1.73-2.21 -> 0.49-0.76.
// 256 was no faster. The cells take 2 MiB of the area, of which a
// broadcast touches only the pages it writes.
const sharedCells = 128

// sharedStreams is how many chunks of sharedChunk bytes the root of a
// larger broadcast may run ahead of the slowest rank, through a ring of
// its own, where it ran one round ahead through its two slots.
const sharedStreams = 8

// The rings take a piece's buffer by masking its number (castRing.bufOff),
// so both counts are powers of two: this fails to compile otherwise.
var _ = [1]struct{}{}[sharedCells&(sharedCells-1)|sharedStreams&(sharedStreams-1)|sharedFolds&(sharedFolds-1)]

// Broadcasts go through rings of buffers behind the slots instead, each
// ring followed by a cache line per rank that counts the pieces the rank
// is done with: the cells, sharedCells of sharedCell bytes, for
// broadcasts that fit one, and the streams, sharedStreams of
// sharedChunk bytes, for the chunks of larger ones. The root writes
// buffer s mod n and goes on; it waits only to write a buffer that a rank
// has not read yet, n pieces ago. So a root that broadcasts again and
// again runs as far ahead of the others as a message algorithm's root does
// through the transports' rings, where the slots held it to one round
// ahead.
const (
	headSize   = int(unsafe.Sizeof(slotHead{}))
	cellStride = headSize + sharedCell
)

// rings returns the cells', the streams' and the folds' rings of an area
// of p ranks, and the size of the area.
func rings(p int) (cells, streams, folds castRing, size int) {
	off := 2 * p * slotStride
	cells = castRing{off: off, stride: cellStride, n: sharedCells, done: off + sharedCells*cellStride, ahead: castAhead, seen: make([]uint32, p)}
	off = cells.done + p*headSize
	streams = castRing{off: off, stride: slotStride, n: sharedStreams, done: off + sharedStreams*slotStride, seen: make([]uint32, p)}
	off = streams.done + p*headSize
	folds = castRing{off: off, stride: p * foldStride, n: sharedFolds, done: off + sharedFolds*p*foldStride, seen: make([]uint32, p)}
	return cells, streams, folds, folds.done + p*headSize
}

// areaSize is the size of the shared area of a communicator of p ranks.
func areaSize(p int) int {
	_, _, _, size := rings(p)
	return size
}

// The folds are the ring of the small reduces (below sharedScatterMin
// bytes): a piece is a cell per rank, in which every rank writes its part
// and goes on, and the reduce's root folds them all. Through the slots a
// rank ran one round ahead of the root only; with 4 ranks on 2 cores every
// rank then had to run once per reduce, and a reduce of 8 B-4 KiB took
// 2-3 us against 1 us for the linear and tree reduces, whose senders run
// ahead through the transports' rings. sharedFolds pieces let them run as
// far ahead.
const (
	sharedFolds = 32
	foldStride  = headSize + sharedScatterMin
)

// area is a communicator's shared memory laid out in slots, and the rounds
// this rank has run in it.
type area struct {
	mem    []byte
	rounds uint32
	// Of the last two rounds, by parity: what kind each was, the rank
	// that read its data if one alone did (rootReads), and whether this
	// rank saw every rank store its number.
	kind   [2]roundKind
	reader [2]int
	synced [2]bool
	// The rings of the broadcasts, and the pieces this rank has run
	// through each.
	cells, streams castRing
	casts, chunks  uint32
	// The folds' ring of the small reduces, the pieces this rank has run
	// through it, and the root of each piece in the ring, by piece mod
	// sharedFolds: that rank alone reads the piece, and says when it is
	// done with it.
	folds     castRing
	foldings  uint32
	foldRoots []int
	p         int
	// scatterFrom is the size from which an all-reduce round scatters
	// (sharedScatterFrom).
	scatterFrom int
	todo        []int // the other ranks, for asReady
	in          slotWriter
	// unshared says why mem is nil: the ranks cannot share memory (it
	// wraps spmd.ErrNotShared), and the Shared algorithms run message
	// algorithms instead.
	unshared error
}

// roundKind is how the ranks read a round's data, which says when they are
// done with it.
type roundKind uint8

const (
	noData    roundKind = iota // a barrier
	readAfter                  // the ranks store the number, then read: done at the next round's
	rootReads                  // as readAfter, but one rank alone reads (a gather's root)
)

// areaOf returns the area of k's communicator, mapping it on first use,
// or nil when its ranks cannot share memory (spmd.Comm.Shares): then the
// Shared algorithms run message algorithms instead (recursive doubling, a
// tree for broadcast), as the hierarchical ones run on a single host, so
// that GORUN_ALGO=shared serves a job of several hosts too. Every rank of
// the communicator gets the same answer; SharedMemory says which, and why.
// The area takes 2 slots of sharedChunk bytes per rank, the cells and
// the streams (areaSize): 8 MiB for 8 ranks, of which a call touches only
// the pages it uses.
func areaOf(k *call) (*area, error) {
	a, err := k.st.sharedArea(k.cc)
	if a == nil || a.mem == nil {
		return nil, err
	}
	return a, nil
}

// SharedMemory reports whether the Shared algorithms (topo.Shared) run on
// c in memory that its ranks share: nil when they do. When the ranks cannot
// share memory, the Shared algorithms run message algorithms instead, at
// several times the cost on one host, and Choose does not pick them:
// the error, which wraps spmd.ErrNotShared, says why (the ranks are on
// several hosts, or their transport maps none). When mapping the memory
// fails, the error is that failure, with which every Shared call on c
// fails too.
//
// It maps c's memory as the first Shared call on c does, sending no
// messages: each rank answers for itself (a mapping may fail on one rank
// alone). Like a collective call, it must not run concurrently with
// another call on c.
func SharedMemory(c *spmd.Comm) error {
	cc := c.Collective()
	a, err := stateOf(cc).sharedArea(cc)
	if err != nil {
		return err
	}
	return a.unshared
}

// sharedArea returns cc's area, st its state, mapping it on first use (under
// st.mu): an area without memory, that says why, when the ranks cannot
// share. A mapping that fails is no area: the call fails, and breaks the
// communicator, instead of running message algorithms on this rank alone.
func (st *state) sharedArea(cc *spmd.Comm) (*area, error) {
	if a := st.area.Load(); a != nil {
		return a, nil
	}
	return st.mapArea(cc)
}

// mapArea is sharedArea's first call on the communicator: apart, so that
// every later call, which finds the area, sets up no frame for the lock
// and its defer.
func (st *state) mapArea(cc *spmd.Comm) (*area, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if a := st.area.Load(); a != nil {
		return a, nil
	}
	a := &area{todo: make([]int, 0, cc.Size()), p: cc.Size(), scatterFrom: sharedScatterFrom(cc.Size(), contract.HostCPUs())}
	a.cells, a.streams, a.folds, _ = rings(a.p)
	a.foldRoots = make([]int, sharedFolds)
	mem, err := cc.Shared(areaSize(a.p))
	switch {
	case errors.Is(err, spmd.ErrNotShared):
		a.unshared = notShared(cc, err)
	case err != nil:
		return nil, fmt.Errorf("mapping the memory of the Shared algorithms: %w", err)
	}
	a.mem = mem
	st.area.Store(a)
	return a, nil
}

// notShared says why the ranks of cc cannot share memory, err being
// spmd.Comm.Shared's error.
func notShared(cc *spmd.Comm, err error) error {
	if hosts := len(topo.LayoutOf(cc).Hosts); hosts > 1 {
		return fmt.Errorf("%w: they are on %d hosts", err, hosts)
	}
	return fmt.Errorf("%w: they are on one host, but their transport maps none (%s=tcp?)", err, contract.EnvTransport)
}

func (a *area) head(r int, round uint32) *slotHead {
	return (*slotHead)(unsafe.Pointer(&a.mem[(2*r+int(round&1))*slotStride]))
}

// data returns n elements of the data of r's slot for round.
func data[T spmd.Number](a *area, r int, round uint32, n int) []T {
	return at[T](a, (2*r+int(round&1))*slotStride, n)
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
	return a.claimRead(k, round, kind, -1, synced, write)
}

// claimRead is claim for a round whose data reader alone reads (rootReads):
// when this rank next writes the slot, it waits for that rank only.
func (a *area) claimRead(k *call, round uint32, kind roundKind, reader int, synced, write bool) error {
	cur, prev := round&1, (round-1)&1
	if write && !a.synced[prev] {
		me := k.cc.Rank()
		switch a.kind[cur] {
		case noData:
		case rootReads:
			if r := a.reader[cur]; r != me {
				if err := a.await(k, r, round-1); err != nil {
					return err
				}
			}
		default:
			for r := range k.cc.Size() {
				if r != me {
					if err := a.await(k, r, round-1); err != nil {
						return err
					}
				}
			}
		}
	}
	a.kind[cur], a.reader[cur], a.synced[cur] = kind, reader, synced
	return nil
}

// publish says that this rank's part of round, of call k, is in its slot.
func (a *area) publish(k *call, me int, round uint32) {
	h := a.head(me, round)
	k.stamp(h)
	h.part.store(round)
}

// await waits for rank r's part of round (or a later round's).
func (a *area) await(k *call, r int, round uint32) error {
	return a.head(r, round).part.wait(k, r, round)
}

// awaitPart waits for rank r's part of round, as await, and checks that r
// wrote it for a call that matches this rank's (call.matches).
func (a *area) awaitPart(k *call, r int, round uint32) error {
	h := a.head(r, round)
	if err := h.part.wait(k, r, round); err != nil {
		return err
	}
	return k.matches(r, h)
}

// stamp writes k's size and collective into the header h of a part that
// k is about to publish.
func (k *call) stamp(h *slotHead) { h.size, h.coll = uint32(k.bytes), uint8(k.coll) }

// matches checks that rank r wrote the part whose header is h for a call
// of k's collective and as many bytes (stamp).
func (k *call) matches(r int, h *slotHead) error {
	if h.size == uint32(k.bytes) && h.coll == uint8(k.coll) {
		return nil
	}
	return k.mismatch(r, h)
}

// mismatch is matches' error, apart so that matches stays small enough to
// inline into the readers' loops.
//
//go:noinline
func (k *call) mismatch(r int, h *slotHead) error {
	if c := topo.Collective(h.coll); c != k.coll {
		return fmt.Errorf("%w: rank %d called %s (%d bytes) where this rank called %s (%d bytes): do the ranks make the same collective calls in the same order?",
			ErrMismatch, r, c, h.size, k.coll, uint32(k.bytes))
	}
	return countError("rank %d called %s with %d bytes, this rank with %d (do the ranks pass matching lengths?)",
		r, k.coll, h.size, uint32(k.bytes))
}

// asReady runs do(r) for every other rank r once the signal sig(r) of r's
// slot for round has come and r's part is of a call that matches this
// rank's (call.matches), taking the ranks as they come, from this rank's
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
			if !sig(r).reached(round) {
				left = append(left, r)
				continue
			}
			if err := k.matches(r, a.head(r, round)); err != nil {
				return err
			}
			do(r)
		}
		if len(left) == len(todo) {
			r := left[0]
			if err := sig(r).wait(k, r, round); err != nil {
				return err
			}
			if err := k.matches(r, a.head(r, round)); err != nil {
				return err
			}
			do(r)
			left = left[1:]
		}
		todo = left
	}
	return nil
}
