package spmd_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// BenchmarkPingPong measures a blocking Send/Recv round trip between two
// ranks, through the matching engine, over each transport.
func BenchmarkPingPong(b *testing.B) {
	for _, kind := range spmdtest.Kinds {
		for _, size := range []int{8, 1 << 20} {
			b.Run(fmt.Sprintf("%s/%dB", kind, size), func(b *testing.B) {
				j := spmdtest.NewJob(b, kind, 2)
				defer j.Close()
				ctx := context.Background()
				done := make(chan error, 1)
				go func() { done <- echo(ctx, j.Worlds[1], b.N+1, size) }()
				buf := make([]byte, size)
				w := j.Worlds[0]
				pingPong(ctx, b, w, buf) // connect outside the timing
				b.SetBytes(int64(2 * size))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					pingPong(ctx, b, w, buf)
				}
				b.StopTimer()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func pingPong(ctx context.Context, b *testing.B, w *spmd.World, buf []byte) {
	if err := w.Send(ctx, 1, 0, buf); err != nil {
		b.Fatal(err)
	}
	if _, err := w.Recv(ctx, 1, 0, buf); err != nil {
		b.Fatal(err)
	}
}

func echo(ctx context.Context, w *spmd.World, n, size int) error {
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if _, err := w.Recv(ctx, 0, 0, buf); err != nil {
			return err
		}
		if err := w.Send(ctx, 0, 0, buf); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkEarlyStream measures 8-byte messages that all arrive before
// their receives are posted: rank 0 sends b.N of them, then rank 1
// receives them, in order, from its queue of early messages. The time per
// message must not grow with b.N (it did, when the queue was a slice
// popped by copying: 140 us a receive behind 1,000,000 messages).
func BenchmarkEarlyStream(b *testing.B) {
	for _, kind := range []spmdtest.Kind{spmdtest.Mem, spmdtest.SHM} {
		b.Run(string(kind), func(b *testing.B) {
			j := spmdtest.NewJob(b, kind, 2)
			defer j.Close()
			ctx := context.Background()
			buf := make([]byte, 8)
			pingPongOnce(ctx, b, j) // connect outside the timing
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := j.Worlds[0].Send(ctx, 1, 0, buf); err != nil {
					b.Fatal(err)
				}
			}
			for range b.N {
				if _, err := j.Worlds[1].Recv(ctx, 0, 0, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func pingPongOnce(ctx context.Context, b *testing.B, j *spmdtest.Job) {
	done := make(chan error, 1)
	go func() { done <- echo(ctx, j.Worlds[1], 1, 8) }()
	pingPong(ctx, b, j.Worlds[0], make([]byte, 8))
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
