package prims_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestCollectivesAllocateNothing runs small all-reduces, broadcasts and
// all-gathers with every algorithm over shared memory and counts the
// process's allocations (both ranks live in this process): in steady
// state a call allocates nothing. Before the calls, their requests and
// their request lists were pooled, a ring all-reduce of 8 bytes made 20
// allocations and a tree one 5, and the garbage collector's pauses made
// the slow tail of small collectives. The bound leaves room for the rare
// message that arrives before its receive is posted (spmd buffers it).
func TestCollectivesAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts need the race detector off: go test -run AllocateNothing ./prims")
	}
	const p, calls = 2, 400
	type op struct {
		coll topo.Collective
		f    func(ctx context.Context, c *spmd.Comm, buf []float32, algo topo.Algo) error
	}
	ops := []op{
		{topo.AllReduce, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.AllReduce(ctx, c, buf, prims.Sum[float32](), prims.WithAlgo(a))
		}},
		{topo.Broadcast, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.Broadcast(ctx, c, buf, 0, prims.WithAlgo(a))
		}},
		{topo.AllGather, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.AllGather(ctx, c, buf[:len(buf)/p], buf, prims.WithAlgo(a))
		}},
	}
	for _, o := range ops {
		for _, algo := range topo.Algos(o.coll) {
			if algo == topo.Hierarchical {
				continue // one host: it is not applicable
			}
			t.Run(fmt.Sprintf("%s/%s", o.coll, algo), func(t *testing.T) {
				var (
					mu     sync.Mutex
					before runtime.MemStats
					after  runtime.MemStats
				)
				spmdtest.RunOn(t, spmdtest.SHM, p, func(ctx context.Context, w *spmd.World) error {
					buf := make([]float32, 2*p)
					// run makes n calls, waits for every rank, and then
					// reads the allocation count on rank 0 into ms.
					run := func(n int, ms *runtime.MemStats) error {
						for range n {
							if err := o.f(ctx, w.Comm, buf, algo); err != nil {
								return err
							}
						}
						if err := w.Barrier(ctx); err != nil {
							return err
						}
						if w.Rank() == 0 {
							mu.Lock()
							runtime.ReadMemStats(ms)
							mu.Unlock()
						}
						return nil
					}
					// Warm up the pools, the scratch buffer and the choices as
					// long as the measured calls run: a broadcast's root runs
					// ahead of its receivers, and the pools must hold as many
					// early messages as it gets ahead by.
					if err := run(calls, &before); err != nil {
						return err
					}
					if err := run(calls, &after); err != nil {
						return err
					}
					return nil
				})
				per := float64(after.Mallocs-before.Mallocs) / float64(calls*p)
				t.Logf("%.2f allocations per call and rank", per)
				if per > 0.5 {
					t.Errorf("%.2f allocations per call and rank; want none in steady state", per)
				}
			})
		}
	}
}
