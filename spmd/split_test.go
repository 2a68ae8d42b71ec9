package spmd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
)

func TestSplitGroupsAndOrders(t *testing.T) {
	each(t, 7, func(ctx context.Context, w *spmd.World) error {
		color := w.Rank() % 3
		if w.Rank() == 6 {
			color = spmd.Undefined
		}
		type k struct{}
		w.SetValue(k{}, "model")
		// Reverse order within each color through the key.
		sub, err := w.Split(ctx, color, -w.Rank())
		if err != nil {
			return err
		}
		if sub != nil && (sub.Value(k{}) != "model" || sub.Collective().Value(k{}) != "model") {
			return fmt.Errorf("split did not inherit the parent's values")
		}
		if color == spmd.Undefined {
			if sub != nil {
				return fmt.Errorf("undefined color got a communicator")
			}
			return nil
		}
		var want []int
		for r := 6 - 1; r >= 0; r-- {
			if r%3 == color {
				want = append(want, r)
			}
		}
		for i, r := range want {
			if sub.WorldRank(i) != r {
				return fmt.Errorf("color %d: rank %d is world %d, want %d", color, i, sub.WorldRank(i), r)
			}
			if r == w.Rank() && sub.Rank() != i {
				return fmt.Errorf("my rank in sub is %d, want %d", sub.Rank(), i)
			}
		}
		return sub.Barrier(ctx)
	})
}

// Traffic on split communicators with the same tags runs concurrently and
// never mixes with the parent's or a sibling's.
func TestSplitTrafficIsolated(t *testing.T) {
	each(t, 4, func(ctx context.Context, w *spmd.World) error {
		a, err := w.Split(ctx, 0, w.Rank()) // everyone, same order as world
		if err != nil {
			return err
		}
		b, err := w.Split(ctx, w.Rank()%2, w.Rank())
		if err != nil {
			return err
		}
		if a.ID() == w.ID() || a.ID() == b.ID() {
			return fmt.Errorf("ids not distinct: world %d a %d b %d", w.ID(), a.ID(), b.ID())
		}
		return ringTraffic(ctx, []*spmd.Comm{w.Comm, a, b}, 50)
	})
}

// ringTraffic sends, on every communicator of comms at once, rounds
// messages with tag 0 around its ring, each carrying the communicator's
// index in comms and the round: a message that lands on another
// communicator, or out of order, is an error.
func ringTraffic(ctx context.Context, comms []*spmd.Comm, rounds int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(comms))
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next, prev := (c.Rank()+1)%c.Size(), (c.Rank()-1+c.Size())%c.Size()
			for r := range rounds {
				out := []int64{int64(i), int64(r)}
				in := make([]int64, 2)
				if _, err := c.Sendrecv(ctx, spmd.Bytes(out), next, 0, spmd.Bytes(in), prev, 0); err != nil {
					errs[i] = err
					return
				}
				if in[0] != int64(i) || in[1] != int64(r) {
					errs[i] = fmt.Errorf("comm %d (id %d) round %d got %v", i, c.ID(), r, in)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestConcurrentSplits: splits of two communicators run at once from two
// goroutines of every rank, which start them in opposite orders on
// neighbouring ranks, as two goroutines making the first hierarchical call
// on two communicators do, and some ranks split them one after the other.
// None may wait for the other (a lock held across the exchange deadlocked
// here), every member of a new communicator must
// agree on its id, and no rank may hold two communicators with one id:
// traffic with the same tags on all of them at once never mixes.
func TestConcurrentSplits(t *testing.T) {
	each(t, 3, func(ctx context.Context, w *spmd.World) error {
		x, err := w.Dup(ctx)
		if err != nil {
			return err
		}
		y, err := w.Dup(ctx)
		if err != nil {
			return err
		}
		live := []*spmd.Comm{w.Comm, x, y}
		for round := range 12 {
			parents, order := []*spmd.Comm{x, y}, []int{0, 1}
			if (w.Rank()+round)%2 == 1 {
				order = []int{1, 0}
			}
			made := make([]*spmd.Comm, 2) // made[0] of x, made[1] of y
			errs := make([]error, 2)
			var wg sync.WaitGroup
			// In every fourth round the odd ranks split one communicator
			// after the other, as MPI lets them: the others' concurrent
			// splits must not wait for the split they make second.
			inTurn := round%4 == 3 && w.Rank()%2 == 1
			for _, i := range order {
				parent := parents[i]
				split := func() {
					if round%3 == 0 {
						made[i], errs[i] = parent.Dup(ctx)
					} else {
						made[i], errs[i] = parent.Split(ctx, parent.Rank()%2, 0)
					}
				}
				if inTurn {
					split()
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					split()
				}()
				// The first goroutine starts its exchange before the second.
				time.Sleep(time.Duration(round%4) * time.Millisecond)
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
			}
			live = append(live, made...)
		}
		ids := map[uint32]int{}
		for i, c := range live {
			if j, ok := ids[c.ID()]; ok {
				return fmt.Errorf("communicators %d and %d both have id %d", j, i, c.ID())
			}
			ids[c.ID()] = i
		}
		return ringTraffic(ctx, live, 20)
	})
}
