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
