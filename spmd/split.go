package spmd

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
)

// Undefined is the color of a rank that wants no part in the communicators
// Split creates; Split returns nil for it (MPI_UNDEFINED).
const Undefined = -1

// splitTag is the collective-context tag of Split's exchange.
const splitTag = barrierTag - 1

// Split partitions the communicator: the ranks that pass the same color
// form a new communicator, ordered by key and then by their rank here. A
// rank that passes Undefined gets nil. Every rank of c must call Split, in
// the same order as its other collective calls on c; the splits that one
// rank makes must not run concurrently from several goroutines.
//
// Traffic on the new communicator never mixes with c's or any other's: its
// id is agreed among its members so that no rank holds two communicators
// with one id.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	if color < Undefined {
		return nil, fmt.Errorf("split: color %d: want >= 0, or Undefined", color)
	}
	return c.split(ctx, "split", color, key)
}

// split is Split; op names the call in its errors.
func (c *Comm) split(ctx context.Context, op string, color, key int) (*Comm, error) {
	core := c.core
	core.splitMu.Lock()
	defer core.splitMu.Unlock()

	core.mu.Lock()
	next := core.nextID
	core.mu.Unlock()

	recs, err := c.allgatherRecord(ctx, splitRecord{color: int64(color), key: int64(key), next: next})
	if err != nil {
		return nil, fmt.Errorf("%s of comm %d: %w", op, c.id, err)
	}
	maxNext := next
	colors := map[int64]bool{}
	for _, r := range recs {
		maxNext = max(maxNext, r.next)
		if r.color != Undefined {
			colors[r.color] = true
		}
	}
	sorted := make([]int64, 0, len(colors))
	for col := range colors {
		sorted = append(sorted, col)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })

	idx := sort.Search(len(sorted), func(i int) bool { return sorted[i] >= int64(color) })
	id := maxNext + 2*uint32(idx)
	core.mu.Lock()
	core.nextID = max(core.nextID, maxNext+2*uint32(len(sorted)))
	if color != Undefined {
		for k, v := range core.values {
			if k.comm == c.base() {
				core.values[valueKey{id, k.key}] = v
			}
		}
		core.valuesGen.Add(1)
	}
	core.mu.Unlock()
	if color == Undefined {
		return nil, nil
	}

	var members []int // ranks of c, ordered by (key, rank)
	for r, rec := range recs {
		if rec.color == int64(color) {
			members = append(members, r)
		}
	}
	sort.SliceStable(members, func(i, j int) bool { return recs[members[i]].key < recs[members[j]].key })
	ranks, rank := make([]int, len(members)), 0
	for i, r := range members {
		ranks[i] = c.ranks[r]
		if r == c.rank {
			rank = i
		}
	}
	return newComm(core, id, rank, ranks), nil
}

type splitRecord struct {
	color, key int64
	next       uint32
}

const splitRecordLen = 20

// allgatherRecord gathers every rank's record by a ring over c's collective
// context: p-1 steps of one small message each.
func (c *Comm) allgatherRecord(ctx context.Context, mine splitRecord) ([]splitRecord, error) {
	cc := c.Collective()
	p := cc.Size()
	all := make([]byte, p*splitRecordLen)
	put := func(i int, r splitRecord) {
		b := all[i*splitRecordLen:]
		binary.LittleEndian.PutUint64(b, uint64(r.color))
		binary.LittleEndian.PutUint64(b[8:], uint64(r.key))
		binary.LittleEndian.PutUint32(b[16:], r.next)
	}
	put(cc.rank, mine)
	right, left := (cc.rank+1)%p, (cc.rank-1+p)%p
	for step := 0; step < p-1; step++ {
		send := (cc.rank - step + p) % p
		recv := (cc.rank - step - 1 + p) % p
		sb := all[send*splitRecordLen : (send+1)*splitRecordLen]
		rb := all[recv*splitRecordLen : (recv+1)*splitRecordLen]
		if _, err := cc.Sendrecv(ctx, sb, right, splitTag, rb, left, splitTag); err != nil {
			return nil, err
		}
	}
	recs := make([]splitRecord, p)
	for i := range recs {
		b := all[i*splitRecordLen:]
		recs[i] = splitRecord{
			color: int64(binary.LittleEndian.Uint64(b)),
			key:   int64(binary.LittleEndian.Uint64(b[8:])),
			next:  binary.LittleEndian.Uint32(b[16:]),
		}
	}
	return recs, nil
}
