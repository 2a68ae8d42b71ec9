package prims_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestCollectivesAllocateNothing runs every collective, 2 elements a rank
// and 1 MiB (on 2 ranks) of it, with every algorithm over shared memory,
// on 2 ranks and on 5, and counts the process's allocations (the ranks
// live in this process): in steady state a call allocates nothing. Before the calls,
// their requests and their request lists were pooled, a ring all-reduce of
// 8 bytes made 20 allocations and a tree one 5, and the garbage
// collector's pauses made the slow tail of small collectives; before large
// inboxes were pooled, a 1 MiB message that arrived ahead of its receive
// cost a fresh, zeroed buffer (2 allocations per call and rank for a ring
// broadcast). The bound leaves room for an inbox that a pool gave up to
// the garbage collector.
func TestCollectivesAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts need the race detector off: go test -run AllocateNothing ./prims")
	}
	ops := []struct {
		coll topo.Collective
		f    func(ctx context.Context, c *spmd.Comm, buf []float32, algo topo.Algo) error
	}{
		{topo.AllReduce, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.AllReduce(ctx, c, buf, prims.Sum[float32](), prims.WithAlgo(a))
		}},
		{topo.Broadcast, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.Broadcast(ctx, c, buf, 0, prims.WithAlgo(a))
		}},
		{topo.AllGather, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			k := len(buf) / c.Size() // in place: this rank's block
			return prims.AllGather(ctx, c, buf[c.Rank()*k:(c.Rank()+1)*k], buf, prims.WithAlgo(a))
		}},
		{topo.Reduce, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.Reduce(ctx, c, buf, buf, prims.Sum[float32](), 0, prims.WithAlgo(a))
		}},
		{topo.ReduceScatter, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			lo, hi := prims.Block(len(buf), c.Size(), c.Rank())
			return prims.ReduceScatter(ctx, c, buf, buf[lo:hi], prims.Sum[float32](), prims.WithAlgo(a))
		}},
		{topo.Gather, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			k := len(buf) / c.Size()
			return prims.Gather(ctx, c, buf[c.Rank()*k:(c.Rank()+1)*k], buf, 0, prims.WithAlgo(a))
		}},
		{topo.Scatter, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			k := len(buf) / c.Size()
			return prims.Scatter(ctx, c, buf, buf[c.Rank()*k:(c.Rank()+1)*k], 0, prims.WithAlgo(a))
		}},
		{topo.AllToAll, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.AllToAll(ctx, c, buf[:len(buf)/2], buf[len(buf)/2:], prims.WithAlgo(a))
		}},
		{topo.Barrier, func(ctx context.Context, c *spmd.Comm, buf []float32, a topo.Algo) error {
			return prims.Barrier(ctx, c, prims.WithAlgo(a))
		}},
	}
	// 1 MiB: whole messages that large go by single copy, and land in a
	// pooled inbox when they arrive before their receive. 5 ranks, small
	// buffers only (the large ones there took a minute on 2 cores): Go
	// keeps a small slice of variable length on the stack only up to 32
	// bytes, so that block boundaries, p+1 ints, allocated at 4 ranks and
	// more but not at 2; and 5 is no power of 2, so the folds run too.
	for _, p := range []int{2, 5} {
		counts := []int{2 * p, 1 << 18}
		if p > 2 {
			counts = counts[:1]
		}
		for _, count := range counts {
			for _, o := range ops {
				for _, algo := range prims.Algos(o.coll) {
					if algo == topo.Hierarchical {
						continue // one host: it is not applicable
					}
					t.Run(fmt.Sprintf("np%d/%dB/%s/%s", p, 4*count, o.coll, algo), func(t *testing.T) {
						per := allocsPerCall(t, p, count, func(ctx context.Context, c *spmd.Comm, buf []float32) error {
							return o.f(ctx, c, buf, algo)
						})
						t.Logf("%.2f allocations per call and rank", per)
						if per > 0.5 {
							t.Errorf("%.2f allocations per call and rank; want none in steady state", per)
						}
					})
				}
			}
		}
	}
}

// allocsPerCall runs f on p ranks over shared memory with a buffer of
// count float32: first to warm up, then in windows, and returns the
// process's allocations per call and rank in the best window. Code that
// allocates per call does so in every window; a broadcast's root, which
// runs ahead of its receivers by a varying lead, makes the pools grow now
// and then.
func allocsPerCall(t *testing.T, p, count int, f func(ctx context.Context, c *spmd.Comm, buf []float32) error) float64 {
	calls := 400 // small messages: cheap, and the root's lead varies
	if count > 1024 || p > 2 {
		calls = 100 // 5 ranks' ring of 40 B took 3-7 ms a call on 2 cores, in one process
	}
	const windows = 3
	var (
		mu  sync.Mutex
		mem [windows + 1]runtime.MemStats
	)
	spmdtest.RunOn(t, spmdtest.SHM, p, func(ctx context.Context, w *spmd.World) error {
		buf := make([]float32, count)
		// run makes n calls, waits for every rank, and then reads the
		// allocation count on rank 0 into ms.
		run := func(n int, ms *runtime.MemStats) error {
			for range n {
				if err := f(ctx, w.Comm, buf); err != nil {
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
		// Warm up the pools, the scratch buffer and the choices.
		if err := run(2*calls, &mem[0]); err != nil {
			return err
		}
		for i := 1; i <= windows; i++ {
			if err := run(calls, &mem[i]); err != nil {
				return err
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	best := uint64(math.MaxUint64)
	for i := 1; i <= windows; i++ {
		best = min(best, mem[i].Mallocs-mem[i-1].Mallocs)
	}
	return float64(best) / float64(calls*p)
}

// TestNonBlockingAllocateNothingBeyondTheRequest issues all-reduces one
// at a time and waits for each, with every algorithm, over shared memory,
// so that each issue starts the communicator's executor goroutine again:
// an issue allocates its Request (the call and its arguments) and the
// Request's done channel, and nothing else; the collective itself still
// allocates nothing. (With the op made by Sum at every call, as here, the
// generic kernel's func value was a third allocation, until Sum made it
// only for the types without a fast kernel; go st.execute() was a fourth.)
func TestNonBlockingAllocateNothingBeyondTheRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts need the race detector off: go test -run AllocateNothing ./prims")
	}
	const p = 2
	for _, count := range []int{2 * p, 1 << 18} {
		for _, algo := range prims.Algos(topo.AllReduce) {
			if algo == topo.Hierarchical {
				continue
			}
			t.Run(fmt.Sprintf("%dB/%s", 4*count, algo), func(t *testing.T) {
				per := allocsPerCall(t, p, count, func(ctx context.Context, c *spmd.Comm, buf []float32) error {
					return prims.IAllReduce(ctx, c, buf, prims.Sum[float32](), prims.WithAlgo(algo)).Wait(ctx)
				})
				t.Logf("%.2f allocations per call and rank", per)
				if per > 2.5 {
					t.Errorf("%.2f allocations per call and rank; want 2: the Request and its channel", per)
				}
			})
		}
	}
}
