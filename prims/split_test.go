package prims_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestSplitConcurrent splits the world into two halves that all-reduce
// at the same time as the world broadcasts, from two goroutines of every
// rank, round after round: traffic of different communicators never
// mixes, and successive calls on one stay in order. The first hierarchical
// call on each splits it, the two at once (a lock spmd held across a
// Split deadlocked them once, and this test made those calls first).
func TestSplitConcurrent(t *testing.T) {
	for _, p := range []int{5, 8} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
				half, err := w.Split(ctx, w.Rank()%2, w.Rank())
				if err != nil {
					return err
				}
				var wg sync.WaitGroup
				var herr, werr error
				wg.Add(2)
				go func() {
					defer wg.Done()
					herr = rounds(ctx, half, topo.AllReduce)
				}()
				go func() {
					defer wg.Done()
					werr = rounds(ctx, w.Comm, topo.Broadcast)
				}()
				wg.Wait()
				if herr != nil {
					return fmt.Errorf("half: %w", herr)
				}
				return werr
			})
		})
	}
}

// rounds runs coll on c with each algorithm in turn, several times.
func rounds(ctx context.Context, c *spmd.Comm, coll topo.Collective) error {
	for round := 0; round < 5; round++ {
		for _, algo := range prims.Algos(coll) {
			k := check{coll, algo, 3000 + round, round%2 == 0}
			if err := run[float32](ctx, c, k); err != nil {
				return fmt.Errorf("round %d: %w", round, err)
			}
		}
	}
	return nil
}

// layouts are host layouts for the hierarchical tests: which host each
// rank is on.
var layouts = []struct {
	name  string
	hosts []string
}{
	{"2x3 block", []string{"a", "a", "a", "b", "b", "b"}},
	{"3x2 round-robin", []string{"a", "b", "c", "a", "b", "c"}},
	{"uneven 3+1+2+1", []string{"a", "b", "a", "c", "c", "a", "d"}},
	{"4x2 block", []string{"a", "a", "b", "b", "c", "c", "d", "d"}},
	{"one per host", []string{"a", "b", "c"}},
}

// TestHierarchical runs the hierarchical algorithms over several host
// layouts, with roots that are and are not their host's leader, and the
// large count once.
func TestHierarchical(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			spmdtest.RunHosts(t, l.hosts, func(ctx context.Context, w *spmd.World) error {
				for _, coll := range []topo.Collective{topo.AllReduce, topo.Reduce, topo.Broadcast, topo.AllGather} {
					for _, n := range []int{1, len(l.hosts) - 1, 1000, 1001} {
						if err := run[int32](ctx, w.Comm, check{coll, topo.Hierarchical, n, n%2 == 0}); err != nil {
							return err
						}
					}
				}
				return run[float32](ctx, w.Comm, check{topo.AllReduce, topo.Hierarchical, big, true})
			})
		})
	}
}

// TestChosen lets topo choose every algorithm (probing the links first),
// on a layout of two hosts, and through GORUN_ALGO.
func TestChosen(t *testing.T) {
	for _, env := range []string{"", "ring", "allreduce=hier,broadcast=linear"} {
		t.Run("GORUN_ALGO="+env, func(t *testing.T) {
			t.Setenv(contract.EnvAlgo, env)
			spmdtest.RunHosts(t, []string{"a", "a", "b", "b", "b"}, func(ctx context.Context, w *spmd.World) error {
				for _, coll := range topo.Collectives {
					for _, n := range []int{3, 100000} {
						if err := runChosen[float64](ctx, w.Comm, coll, n); err != nil {
							return err
						}
					}
				}
				return nil
			})
		})
	}
}

// runChosen runs coll without forcing an algorithm. Where GORUN_ALGO
// names one that does not implement coll, the call must fail instead.
func runChosen[T spmd.Number](ctx context.Context, c *spmd.Comm, coll topo.Collective, n int) error {
	err := run[T](ctx, c, check{coll, "", n, false})
	if _, ferr := prims.Forced(coll); ferr != nil {
		if err == nil {
			return fmt.Errorf("%s ran although %s", coll, ferr)
		}
		return nil
	}
	return err
}
