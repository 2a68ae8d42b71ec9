// Command initbarrier is the gorun side of the launch benchmark: every rank
// joins the job, passes one barrier, and exits.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gorun-hpc/gorun/spmd"
)

func main() {
	ctx := context.Background()
	w, err := spmd.Init(ctx)
	if err == nil {
		err = w.Barrier(ctx)
		w.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "initbarrier:", err)
		os.Exit(1)
	}
}
