// Command errclose is a job whose rank 0 fails on its own: it closes its
// world, as a deferred Close would, and takes a moment to exit, while the
// other ranks, waiting for a message from it, lose it and exit at once.
// With -exit0 rank 0 closes its world and exits 0 at once instead: it
// leaves early, and the others fail for it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
)

func main() {
	exit0 := flag.Bool("exit0", false, "rank 0 exits 0 at once")
	flag.Parse()
	ctx := context.Background()
	w, err := spmd.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "errclose:", err)
		os.Exit(1)
	}
	if err := w.Barrier(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "errclose:", err)
		os.Exit(1)
	}
	if w.Rank() == 0 && *exit0 {
		w.Close()
		os.Exit(0)
	}
	if w.Rank() == 0 {
		w.Close()
		time.Sleep(300 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "errclose: rank 0 failed on its own")
		os.Exit(1)
	}
	_, err = w.Recv(ctx, 0, 5, make([]byte, 1))
	fmt.Fprintln(os.Stderr, "errclose:", err)
	os.Exit(1)
}
