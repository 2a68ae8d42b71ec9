// Command hello is the smallest gorun program: every rank joins the job and
// says where it runs.
//
//	gorun -np 4 ./examples/hello
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gorun-hpc/gorun/spmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hello:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	fmt.Printf("rank %d of %d on %s (local rank %d)\n", w.Rank(), w.Size(), w.Hostname(), w.LocalRank())
	return w.Barrier(ctx)
}
