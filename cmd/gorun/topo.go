package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// topoProgram turns a --topo invocation into a job: N ranks of gorun itself
// in its hidden rank mode, which print the topology report (rank 0) and
// exit. It replaces the program; --topo takes none.
func topoProgram(args []string) (string, []string, error) {
	if len(args) > 0 {
		return "", nil, usageError{fmt.Errorf("--topo runs gorun's own probe on the ranks and takes no PROGRAM (got %q): use gorun --topo -np N", args[0])}
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("--topo: cannot find gorun's own executable: %w", err)
	}
	return self, []string{"--" + flagTopoRank}, nil
}

// runTopoRank is one rank of gorun --topo: join the job, probe the links
// collectively, and let rank 0 print what was detected and chosen.
func runTopoRank(ctx context.Context) error {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := prims.Report(ctx, w, os.Stdout); err != nil {
		return fmt.Errorf("rank %d: %w", w.Rank(), err)
	}
	// The report says whether the ranks can share memory, and whether rank
	// 0's Shared algorithms run in it; another rank on which mapping it
	// failed says so itself (each rank maps its own).
	if err := prims.SharedMemory(w.Comm); err != nil && w.Rank() != 0 && !errors.Is(err, spmd.ErrNotShared) {
		fmt.Fprintf(os.Stderr, "rank %d: shared memory: %v\n", w.Rank(), err)
	}
	return w.Barrier(ctx)
}
