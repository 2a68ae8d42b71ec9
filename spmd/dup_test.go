package spmd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// eachSize runs f over every transport, for 1 to 5 ranks.
func eachSize(t *testing.T, f func(ctx context.Context, w *spmd.World) error) {
	for _, kind := range spmdtest.Kinds {
		for p := 1; p <= 5; p++ {
			t.Run(fmt.Sprintf("%s/p=%d", kind, p), func(t *testing.T) { spmdtest.RunOn(t, kind, p, f) })
		}
	}
}

// TestDup duplicates the world and a half of it: each duplicate has the
// ranks of its parent in the same order and a new id, its traffic never
// mixes with its parent's, collectives run on both, and freeing the
// duplicate leaves the parent working.
func TestDup(t *testing.T) {
	eachSize(t, func(ctx context.Context, w *spmd.World) error {
		half, err := w.Split(ctx, w.Rank()%2, w.Rank())
		if err != nil {
			return err
		}
		for _, parent := range []*spmd.Comm{w.Comm, half} {
			if err := dupOf(ctx, parent); err != nil {
				return fmt.Errorf("dup of comm %d: %w", parent.ID(), err)
			}
		}
		return nil
	})
}

func dupOf(ctx context.Context, c *spmd.Comm) error {
	d, err := c.Dup(ctx)
	if err != nil {
		return err
	}
	if d.ID() == c.ID() || d.Size() != c.Size() || d.Rank() != c.Rank() {
		return fmt.Errorf("duplicate has id %d, rank %d of %d; parent %d, rank %d of %d", d.ID(), d.Rank(), d.Size(), c.ID(), c.Rank(), c.Size())
	}
	for r := range c.Size() {
		if d.WorldRank(r) != c.WorldRank(r) {
			return fmt.Errorf("duplicate's rank %d is world rank %d, parent's %d", r, d.WorldRank(r), c.WorldRank(r))
		}
	}
	if err := interleave(ctx, c, d); err != nil {
		return err
	}
	if err := d.Barrier(ctx); err != nil {
		return err
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if err := d.Free(); err != nil {
		return err
	}
	if err := d.Send(ctx, d.Rank(), 1, nil); !errors.Is(err, spmd.ErrFreed) {
		return fmt.Errorf("send on the freed duplicate: got %v, want ErrFreed", err)
	}
	if err := interleave(ctx, c, c); err != nil {
		return fmt.Errorf("parent after its duplicate was freed: %w", err)
	}
	return c.Barrier(ctx)
}

// interleave sends the same tags on a and b, which have the same ranks,
// alternately, to the next rank, the messages for b first, and receives
// them in the opposite order: each receive gets its own communicator's
// message. With a == b it checks the messages come in order.
func interleave(ctx context.Context, a, b *spmd.Comm) error {
	const rounds = 20
	p, r := a.Size(), a.Rank()
	next, prev := (r+1)%p, (r+p-1)%p
	var recvs []*spmd.Request
	bufs := make([][]byte, 2*rounds)
	for i := range rounds {
		for j, c := range []*spmd.Comm{a, b} {
			bufs[2*i+j] = make([]byte, 2)
			recvs = append(recvs, c.Irecv(prev, 5, bufs[2*i+j]))
		}
	}
	for i := range rounds {
		for j, c := range []*spmd.Comm{b, a} {
			if err := c.Send(ctx, next, 5, []byte{byte(1 - j), byte(i)}); err != nil {
				return err
			}
		}
	}
	if err := spmd.WaitAll(ctx, recvs...); err != nil {
		return err
	}
	for i, got := range bufs {
		want := []byte{byte(i % 2), byte(i / 2)}
		if a == b { // one communicator: a's sends came second
			want = []byte{byte(1 - i%2), byte(i / 2)}
		}
		if got[0] != want[0] || got[1] != want[1] {
			return fmt.Errorf("receive %d got %v, want %v", i, got, want)
		}
	}
	return nil
}

// TestDupValues: a duplicate inherits its parent's values, as a Split's
// communicator does, but setting one on either leaves the other's alone,
// and its shared memory is its own.
func TestDupValues(t *testing.T) {
	eachSize(t, func(ctx context.Context, w *spmd.World) error {
		type key struct{}
		w.SetValue(key{}, "parent")
		d, err := w.Dup(ctx)
		if err != nil {
			return err
		}
		defer d.Free()
		if d.Value(key{}) != "parent" {
			return fmt.Errorf("duplicate's value is %v, want the parent's", d.Value(key{}))
		}
		d.SetValue(key{}, "dup")
		if w.Value(key{}) != "parent" || d.Value(key{}) != "dup" {
			return fmt.Errorf("after setting the duplicate's value: parent has %v, duplicate %v", w.Value(key{}), d.Value(key{}))
		}
		if !w.Shares() {
			return nil
		}
		pm, err := w.Shared(64)
		if err != nil {
			return err
		}
		dm, err := d.Shared(64)
		if err != nil {
			return err
		}
		pm[w.Rank()] = 1
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		for r := range w.Size() {
			if pm[r] != 1 || dm[r] != 0 {
				return fmt.Errorf("byte %d is %d in the parent's shared memory and %d in the duplicate's; want 1 and 0", r, pm[r], dm[r])
			}
		}
		return w.Barrier(ctx)
	})
}
