package shm

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// counter is a benchmark Handler: it reads every message into one buffer
// and counts deliveries; a waiter spins briefly and then sleeps until the
// count it wants is reached.
type counter struct {
	buf    []byte
	n      atomic.Int64
	asleep atomic.Bool
	wake   chan struct{}
}

func newCounter(size int) *counter {
	return &counter{buf: make([]byte, size), wake: make(chan struct{}, 1)}
}

func (c *counter) Buffer(_ int, h transport.Header) []byte { return c.buf[:h.Len] }

func (c *counter) Deliver(int, transport.Header, []byte) {
	c.n.Add(1)
	if c.asleep.Load() && c.asleep.CompareAndSwap(true, false) {
		c.wake <- struct{}{}
	}
}

func (c *counter) Lost(int, error) {}

func (c *counter) wait(want int64, spin int) {
	for i := 0; c.n.Load() < want; i++ {
		if i < spin {
			runtime.Gosched()
			continue
		}
		c.asleep.Store(true)
		if c.n.Load() < want || !c.asleep.CompareAndSwap(true, false) {
			<-c.wake
		}
	}
}

// echoer sends every message it gets straight back from Deliver.
type echoer struct {
	tr  *Transport
	buf [64]byte
}

func (e *echoer) Buffer(_ int, h transport.Header) []byte { return e.buf[:h.Len] }
func (e *echoer) Deliver(peer int, h transport.Header, p []byte) {
	e.tr.Send(context.Background(), peer, h, p)
}
func (e *echoer) Lost(int, error) {}

// BenchmarkPingPong8B measures 8-byte round trips between rank 0 and rank
// 1, as goroutines of this process and as two processes, and with 4 or 8
// processes on the host where the other ranks ping-pong in pairs, too. The
// half-rtt metric is the one-way latency. spin=0 blocks on the futex at
// once, spin=100 is the default.
func BenchmarkPingPong8B(b *testing.B) {
	for _, spin := range benchSpins {
		b.Run(fmt.Sprintf("goroutines/spin=%d", spin), func(b *testing.B) {
			c := build(b, 2, WithSpin(spin))
			peer := &echoer{tr: c.ts[1]}
			c.ts[1].Start(peer)
			h := newCounter(8)
			c.ts[0].Start(h)
			pingPong(b, c.ts[0], h, spin)
		})
		for _, ranks := range []int{2, 4, 8} {
			b.Run(fmt.Sprintf("processes=%d/spin=%d", ranks, spin), func(b *testing.B) {
				job, secret := newJobID(), newSecret()
				local := make([]int, ranks)
				for i := range local {
					local[i] = i
				}
				tr, err := New(job, 0, local, ranks, secret, WithSpin(spin))
				if err != nil {
					b.Fatal(err)
				}
				defer Cleanup(job)
				defer tr.Close()
				c := newCounter(8)
				tr.Start(c)
				startChildren(b, job, secret, "echo", ranks, spin)
				pingPong(b, tr, c, spin)
			})
		}
	}
}

func pingPong(b *testing.B, tr *Transport, c *counter, spin int) {
	ctx := context.Background()
	h := transport.Header{Tag: 1, Len: 8}
	ping := make([]byte, 8)
	round := func(i int64) {
		if err := tr.Send(ctx, 1, h, ping); err != nil {
			b.Fatal(err)
		}
		c.wait(i, spin)
	}
	round(1) // attach outside the timed loop
	b.SetBytes(2 * 8)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range int64(b.N) {
		round(i + 2)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/half-rtt")
}

func BenchmarkThroughput(b *testing.B) {
	for _, size := range []int{1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) { throughput(b, size) })
	}
}

// BenchmarkRingSize is the measurement behind DefaultRingSize.
func BenchmarkRingSize(b *testing.B) {
	for _, ring := range []int{256 << 10, 1 << 20, 4 << 20} {
		for _, size := range []int{64 << 10, 16 << 20} {
			b.Run(fmt.Sprintf("ring=%dKiB/msg=%dKiB", ring>>10, size>>10), func(b *testing.B) {
				throughput(b, size, WithRingSize(ring))
			})
		}
	}
}

func throughput(b *testing.B, size int, opts ...Option) {
	c := build(b, 2, opts...)
	sink := newCounter(size)
	c.ts[0].Start(newCounter(0))
	c.ts[1].Start(sink)
	ctx := context.Background()
	payload := make([]byte, size)
	h := transport.Header{Tag: 2, Len: size}
	if err := c.ts[0].Send(ctx, 1, h, payload); err != nil { // attach
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := c.ts[0].Send(ctx, 1, h, payload); err != nil {
			b.Fatal(err)
		}
	}
	sink.wait(int64(b.N)+1, DefaultSpin)
}

var benchSpins = []int{DefaultSpin, OversubscribedSpin, 0}

// BenchmarkStream measures one stream of messages of each size through
// the ring (streamed) and by single copy, between two goroutines; see
// DefaultSingleCopy for what the collectives showed.
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{16 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20, 16 << 20} {
		for _, mode := range []struct {
			name string
			min  int
		}{{"streamed", 0}, {"single", 1}} {
			b.Run(fmt.Sprintf("msg=%dKiB/%s", size>>10, mode.name), func(b *testing.B) {
				throughput(b, size, WithSingleCopy(mode.min))
			})
		}
	}
}
