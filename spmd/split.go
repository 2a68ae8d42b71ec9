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

// splitTag is the collective-context tag of Split's exchange of records,
// and agreeTag that of its vote on them.
const (
	splitTag = barrierTag - 1
	agreeTag = barrierTag - 3
)

// Split partitions the communicator: the ranks that pass the same color
// form a new communicator, ordered by key and then by their rank here. A
// rank that passes Undefined gets nil. Every rank of c must call Split, in
// the same order as its other collective calls on c, and a rank must not
// split one communicator from several goroutines at once; splits of
// different communicators may run at once, from any goroutines.
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
//
// The ids: every rank proposes the lowest id it has not used, and the
// colours, in order, take pairs of ids from the highest proposal on. Each
// rank then takes that range for itself if no other Split on it has taken
// ids from there since it proposed, and all vote: if any could not, all
// propose again. With one Split at a time on a rank every vote passes. A
// lock held across the exchange, as there was, deadlocked two goroutines
// splitting two communicators where ranks took them in opposite orders.
//
// Two Splits that keep taking each other's ids could retry for ever, so
// one whose vote failed lets those of communicators with lower ids go
// first: before it proposes again, it waits until each of them under way
// on this rank that is inside (all its members have entered it: it has
// finished an exchange) finishes its attempt. Such a Split depends on
// nothing but its members, who are all in it, so the wait ends; one that
// a member has not entered yet is not waited for, as that member may be
// busy with this very Split.
func (c *Comm) split(ctx context.Context, op string, color, key int) (*Comm, error) {
	core := c.core
	me := core.splitEnter(c.base())
	defer core.splitLeave(me)
	for {
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
		end := maxNext + 2*uint32(len(colors))
		core.mu.Lock()
		me.inside = true
		ok := maxNext >= core.nextID
		core.nextID = max(core.nextID, end)
		core.mu.Unlock()
		all, err := c.allAgree(ctx, ok)
		if err != nil {
			return nil, fmt.Errorf("%s of comm %d: %w", op, c.id, err)
		}
		if all {
			return c.splitFrom(recs, maxNext, colors, color), nil
		}
		if err := core.splitYield(ctx, me); err != nil {
			return nil, fmt.Errorf("%s of comm %d: %w", op, c.id, err)
		}
	}
}

// splitFrom makes this rank's communicator of color out of the agreed
// records, its colours taking pairs of ids from base on (nil for Undefined).
func (c *Comm) splitFrom(recs []splitRecord, base uint32, colors map[int64]bool, color int) *Comm {
	sorted := make([]int64, 0, len(colors))
	for col := range colors {
		sorted = append(sorted, col)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	if color == Undefined {
		return nil
	}
	idx := sort.Search(len(sorted), func(i int) bool { return sorted[i] >= int64(color) })
	id := base + 2*uint32(idx)
	core := c.core
	core.mu.Lock()
	for k, v := range core.values {
		if k.comm == c.base() {
			core.values[valueKey{id, k.key}] = v
		}
	}
	core.valuesGen.Add(1)
	core.mu.Unlock()

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
	return newComm(core, id, rank, ranks)
}

// splitOp is a Split under way on this rank: the communicator it
// splits, whether it is inside (has finished an exchange), and how many
// attempts it has finished. Guarded by core.mu.
type splitOp struct {
	parent   uint32
	inside   bool
	attempts uint64
}

// splitEnter notes a Split of parent under way on this rank, and
// splitLeave its end.
func (core *core) splitEnter(parent uint32) *splitOp {
	op := &splitOp{parent: parent}
	core.mu.Lock()
	if core.splits == nil {
		core.splits = map[*splitOp]bool{}
		core.splitChanged = make(chan struct{})
	}
	core.splits[op] = true
	core.mu.Unlock()
	return op
}

func (core *core) splitLeave(op *splitOp) {
	core.mu.Lock()
	delete(core.splits, op)
	core.splitSignal()
	core.mu.Unlock()
}

// splitSignal wakes the Splits waiting in splitYield. Caller holds mu.
func (core *core) splitSignal() {
	close(core.splitChanged)
	core.splitChanged = make(chan struct{})
}

// splitYield ends op's failed attempt and waits until every Split of a
// communicator with a lower id that is under way on this rank and inside
// has finished its attempt.
func (core *core) splitYield(ctx context.Context, op *splitOp) error {
	core.mu.Lock()
	op.attempts++
	core.splitSignal()
	ahead := map[*splitOp]uint64{}
	for o := range core.splits {
		if o.parent < op.parent && o.inside {
			ahead[o] = o.attempts
		}
	}
	core.mu.Unlock()
	for {
		core.mu.Lock()
		for o, n := range ahead {
			if !core.splits[o] || o.attempts > n {
				delete(ahead, o)
			}
		}
		changed := core.splitChanged
		core.mu.Unlock()
		if len(ahead) == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// allAgree returns whether ok is true on every rank of c: a dissemination
// of the AND over c's collective context, ceil(lg p) rounds of a byte.
func (c *Comm) allAgree(ctx context.Context, ok bool) (bool, error) {
	cc := c.Collective()
	p := cc.Size()
	mine, theirs := []byte{0}, []byte{0}
	if ok {
		mine[0] = 1
	}
	for d := 1; d < p; d *= 2 {
		to, from := (cc.rank+d)%p, (cc.rank-d+p)%p
		if _, err := cc.Sendrecv(ctx, mine, to, agreeTag, theirs, from, agreeTag); err != nil {
			return false, err
		}
		mine[0] &= theirs[0]
	}
	return mine[0] == 1, nil
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
