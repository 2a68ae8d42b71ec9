// Command window times windows of non-blocking point-to-point calls, as a
// parameter server's or an expert layer's exchange makes them: each rank
// posts --window Irecvs from every other rank, one per tag, then sends
// --window Isends of --bytes to every other rank, and waits for all of
// them (WaitAll). It prints the mean time of an exchange on rank 0.
// bench/mpi/window.c does the same with Open MPI.
//
//	gorun -np 4 bench/window --window 64 --bytes 8 --exchanges 2000
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
	window := flag.Int("window", 64, "messages each rank sends to every other rank per exchange")
	size := flag.String("bytes", "8", "bytes per message (or with KiB/MiB)")
	exchanges := flag.Int("exchanges", 2000, "timed exchanges")
	warmup := flag.Int("warmup", 100, "exchanges before timing")
	flag.Parse()
	if err := run(*window, *size, *exchanges, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "window:", err)
		os.Exit(1)
	}
}

func run(window int, size string, exchanges, warmup int) error {
	n, err := spmd.ParseSize(size)
	switch {
	case err != nil:
		return fmt.Errorf("--bytes %q: %w", size, err)
	case window < 1:
		return fmt.Errorf("--window %d: want at least 1", window)
	case exchanges < 1:
		return fmt.Errorf("--exchanges %d: want at least 1", exchanges)
	case warmup < 0:
		return fmt.Errorf("--warmup %d: want 0 or more", warmup)
	}
	ctx := context.Background()
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	p, me := w.Size(), w.Rank()
	send := make([]byte, n)
	recv := make([][]byte, p*window)
	for i := range recv {
		recv[i] = make([]byte, n)
	}
	reqs := make([]*spmd.Request, 0, 2*p*window)
	exchange := func() error {
		reqs = reqs[:0]
		for k := 1; k < p; k++ {
			src := (me - k + p) % p
			for j := range window {
				reqs = append(reqs, w.Irecv(src, j, recv[src*window+j]))
			}
		}
		for k := 1; k < p; k++ {
			dst := (me + k) % p
			for j := range window {
				reqs = append(reqs, w.Isend(ctx, dst, j, send))
			}
		}
		err := spmd.WaitAll(ctx, reqs...)
		for _, r := range reqs {
			r.Free()
		}
		return err
	}
	for range warmup {
		if err := exchange(); err != nil {
			return err
		}
	}
	if err := w.Barrier(ctx); err != nil {
		return err
	}
	start := time.Now()
	for range exchanges {
		if err := exchange(); err != nil {
			return err
		}
	}
	d := time.Since(start)
	if err := w.Barrier(ctx); err != nil {
		return err
	}
	if me == 0 {
		fmt.Printf("np %d window %d x %d B: %.2f us an exchange\n", p, window, n, float64(d.Nanoseconds())/float64(exchanges)/1e3)
	}
	return nil
}
