// Command pingpong measures point-to-point latency and bandwidth between
// ranks 0 and 1, printed like osu_latency: message size, half the round
// trip, and the bandwidth that implies.
//
// With -stream it measures a one-way stream instead: rank 0 sends the
// messages of each size back to back with blocking sends, rank 1 receives
// them and answers the last with an empty message, and it prints the time
// per message (the inverse of the message rate, as osu_mbw_mr with one
// pair and blocking calls) and the bandwidth. bench/mpi/stream.c is the
// same for MPI.
//
//	gorun -np 2 ./examples/pingpong -max 64MiB
//	gorun -np 2 ./examples/pingpong -stream -max 4KiB -iters 1000000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	maxSize := flag.String("max", "64MiB", "largest message size (bytes, or with KiB/MiB/GiB)")
	iters := flag.Int("iters", 1000, "round trips per size for small messages (fewer for large ones)")
	warmup := flag.Int("warmup", 100, "round trips before timing, for small messages")
	stream := flag.Bool("stream", false, "time a one-way stream of -iters messages per size instead of round trips")
	flag.Parse()
	max, err := spmd.ParseSize(*maxSize)
	if err != nil {
		err = fmt.Errorf("-max %w", err)
	}
	if err == nil {
		err = run(ctx, max, *iters, *warmup, *stream)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pingpong:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, max, iters, warmup int, stream bool) error {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	if w.Size() < 2 {
		return fmt.Errorf("needs 2 ranks, has %d: run it with gorun -np 2", w.Size())
	}
	if w.Rank() == 0 {
		fmt.Printf("# gorun pingpong between rank 0 (%s) and rank 1 (%s)\n", w.Peers()[0].Hostname, w.Peers()[1].Hostname)
		if stream {
			fmt.Printf("%-12s %14s %12s\n", "# size(B)", "message(us)", "GB/s")
		} else {
			fmt.Printf("%-12s %14s %12s\n", "# size(B)", "latency(us)", "GB/s")
		}
	}
	buf := make([]byte, max)
	for _, size := range sizes(max) {
		n, wu := scaled(iters, size), scaled(warmup, size)
		if w.Rank() > 1 {
			continue
		}
		measure := rounds
		if stream {
			measure = streams
		}
		if _, err := measure(ctx, w, buf[:size], wu); err != nil {
			return err
		}
		d, err := measure(ctx, w, buf[:size], n)
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			half := d.Seconds() / float64(2*n)
			if stream {
				half = d.Seconds() / float64(n)
			}
			gbps := 0.0
			if size > 0 {
				gbps = float64(size) / half / 1e9
			}
			fmt.Printf("%-12d %14.2f %12.3f\n", size, half*1e6, gbps)
		}
	}
	return w.Barrier(ctx)
}

// rounds times n round trips of msg between ranks 0 and 1.
func rounds(ctx context.Context, w *spmd.World, msg []byte, n int) (time.Duration, error) {
	peer := 1 - w.Rank()
	start := time.Now()
	for i := 0; i < n; i++ {
		if w.Rank() == 0 {
			if err := w.Send(ctx, peer, 0, msg); err != nil {
				return 0, err
			}
			if _, err := w.Recv(ctx, peer, 0, msg); err != nil {
				return 0, err
			}
		} else {
			if _, err := w.Recv(ctx, peer, 0, msg); err != nil {
				return 0, err
			}
			if err := w.Send(ctx, peer, 0, msg); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(start), nil
}

// streams times n messages msg from rank 0 to rank 1, until rank 0 has
// rank 1's empty answer to the last.
func streams(ctx context.Context, w *spmd.World, msg []byte, n int) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		var err error
		if w.Rank() == 0 {
			err = w.Send(ctx, 1, 0, msg)
		} else {
			_, err = w.Recv(ctx, 0, 0, msg)
		}
		if err != nil {
			return 0, err
		}
	}
	var err error
	if w.Rank() == 0 {
		_, err = w.Recv(ctx, 1, 1, nil)
	} else {
		err = w.Send(ctx, 0, 1, nil)
	}
	return time.Since(start), err
}

// sizes returns 0, then powers of two from 1 to max.
func sizes(max int) []int {
	s := []int{0}
	for n := 1; n <= max; n *= 2 {
		s = append(s, n)
	}
	return s
}

// scaled cuts the iteration count for large messages so each size takes
// about the same time, as the OSU benchmarks do.
func scaled(n, size int) int {
	if size > 64<<10 {
		n = n * (64 << 10) / size
	}
	return max(n, 5)
}
