// Command server is the first program of the MPMD test: rank 0 receives
// a number from every other rank, which run the worker program.
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
	sum := 0
	buf := make([]byte, 8)
	for r := 1; r < w.Size(); r++ {
		if _, err := w.Recv(ctx, r, 0, buf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		sum += int(binary.LittleEndian.Uint64(buf))
	}
	fmt.Printf("server: rank %d of %d got %d from the workers\n", w.Rank(), w.Size(), sum)
}
