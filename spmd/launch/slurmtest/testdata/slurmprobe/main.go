// Command slurmprobe is a gorun program for the Slurm end-to-end tests:
// every rank joins the job and prints where Slurm and gorun placed it,
//
//	rank R of N node NODE host HOSTID local L of LS noderank K
//
// with NODE from SLURMD_NODENAME. With SLURMPROBE_DIE_ON=NODE, local rank 0
// on that node kills itself with SIGKILL once every rank has arrived, and
// the others wait until they are stopped (at most ten minutes).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/spmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "slurmprobe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	node := os.Getenv("SLURMD_NODENAME")
	fmt.Printf("rank %d of %d node %s host %s local %s of %s noderank %s\n", w.Rank(), w.Size(), node,
		os.Getenv(contract.EnvHostID), os.Getenv(contract.EnvLocalRank), os.Getenv(contract.EnvLocalSize), os.Getenv(contract.EnvNodeRank))
	if err := w.Barrier(ctx); err != nil {
		return err
	}
	die := os.Getenv("SLURMPROBE_DIE_ON")
	if die == "" {
		return nil
	}
	if die == node && w.LocalRank() == 0 {
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("rank %d: still running after 10 minutes", w.Rank())
	}
}
