// Command worker is the second program of the MPMD test: it sends the
// server (rank 0) ten times its rank.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/gorun-hpc/gorun/spmd"
)

func main() {
	ctx := context.Background()
	w, err := spmd.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer w.Close()
	buf := binary.LittleEndian.AppendUint64(nil, uint64(10*w.Rank()))
	if err := w.Send(ctx, 0, 0, buf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("worker: rank %d of %d, role %s\n", w.Rank(), w.Size(), os.Getenv("ROLE"))
}
