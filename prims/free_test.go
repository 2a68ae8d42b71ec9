package prims_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestFreeLetsGoOfSharedMemory splits, uses and frees communicators over
// shared memory again and again, with shared and hierarchical all-reduces
// (which map a communicator's area and split it in two): the shared
// memory the process maps, and its goroutines, stay where they were,
// while the areas of each communicator and its halves take megabytes.
func TestFreeLetsGoOfSharedMemory(t *testing.T) {
	const ranks, comms, n = 4, 12, 1 << 18 // 1 MiB of float32
	var shmemBefore, shmemAfter, goBefore, goAfter int
	spmdtest.RunOn(t, spmdtest.SHM, ranks, func(ctx context.Context, w *spmd.World) error {
		buf := make([]float32, n)
		allReduce := func(c *spmd.Comm, algo topo.Algo) error {
			for i := range buf {
				buf[i] = float32(c.Rank() + i%7)
			}
			if err := prims.AllReduce(ctx, c, buf, prims.Sum[float32](), prims.WithAlgo(algo)); err != nil {
				return err
			}
			for i, v := range buf {
				if want := float32(c.Size()*(c.Size()-1)/2 + c.Size()*(i%7)); v != want {
					return fmt.Errorf("%s all-reduce: element %d is %v, want %v", algo, i, v, want)
				}
			}
			return nil
		}
		// The world's area, and the pools, are made before counting.
		if err := allReduce(w.Comm, topo.Shared); err != nil {
			return err
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if w.Rank() == 0 {
			runtime.GC()
			shmemBefore, goBefore = rssShmem(t), runtime.NumGoroutine()
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		for i := 0; i < comms; i++ {
			c, err := w.Split(ctx, 0, w.Rank())
			if err != nil {
				return err
			}
			for _, algo := range []topo.Algo{topo.Shared, topo.Hierarchical} {
				if err := allReduce(c, algo); err != nil {
					return fmt.Errorf("comm %d: %w", i, err)
				}
			}
			if err := c.Free(); err != nil {
				return err
			}
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if w.Rank() == 0 {
			runtime.GC()
			shmemAfter, goAfter = rssShmem(t), runtime.NumGoroutine()
		}
		return w.Barrier(ctx)
	})
	// Each communicator's all-reduce touched about 2 MiB of its area: kept,
	// the 12 would add 24 MiB.
	if grew := shmemAfter - shmemBefore; grew > 4<<20 {
		t.Errorf("shared memory mapped grew by %d KiB over %d freed communicators (from %d KiB)", grew>>10, comms, shmemBefore>>10)
	}
	// The communicators' goroutines (prims's notice receives, 3 per rank
	// and communicator) end with Free; a few of the job's own may be
	// between calls.
	if goAfter > goBefore+8 {
		t.Errorf("%d goroutines after freeing %d communicators, %d before", goAfter, comms, goBefore)
	}
}

// rssShmem returns the shared memory this process has resident
// (RssShmem in /proc/self/status), in bytes.
func rssShmem(t *testing.T) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "RssShmem:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatalf("RssShmem: %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssShmem in /proc/self/status")
	return 0
}
