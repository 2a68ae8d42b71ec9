package spmd_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

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
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i, c := range []*spmd.Comm{w.Comm, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next, prev := (c.Rank()+1)%c.Size(), (c.Rank()-1+c.Size())%c.Size()
				for round := 0; round < 50; round++ {
					out := []int64{int64(i), int64(round)}
					in := make([]int64, 2)
					if _, err := c.Sendrecv(ctx, spmd.Bytes(out), next, 0, spmd.Bytes(in), prev, 0); err != nil {
						errs[i] = err
						return
					}
					if in[0] != int64(i) || in[1] != int64(round) {
						errs[i] = fmt.Errorf("comm %d round %d got %v", i, round, in)
						return
					}
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
}
