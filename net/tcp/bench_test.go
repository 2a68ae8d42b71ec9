package tcp

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// sink is a Handler that reads every message into one posted buffer and
// counts arrivals, as a matcher with a posted receive would.
type sink struct {
	buf     []byte
	arrived chan struct{} // one token per message, if not nil
	count   atomic.Int64
	target  atomic.Int64
	done    chan struct{} // closed when count reaches target
}

func newSink(size int, pingPong bool) *sink {
	s := &sink{buf: make([]byte, size), done: make(chan struct{})}
	if pingPong {
		s.arrived = make(chan struct{}, 1)
	}
	return s
}

func (s *sink) Buffer(_ int, h transport.Header) []byte { return s.buf[:h.Len] }

func (s *sink) Deliver(int, transport.Header, []byte) {
	if s.arrived != nil {
		s.arrived <- struct{}{}
		return
	}
	if s.count.Add(1) == s.target.Load() {
		close(s.done)
	}
}

func (s *sink) Lost(int, error) {}

// BenchmarkPingPong8B measures round trips of 8-byte messages, with a
// background context and with one that can be cancelled (which costs a
// context.AfterFunc per Send).
func BenchmarkPingPong8B(b *testing.B) {
	b.Run("background", func(b *testing.B) { pingPong(b, context.Background()) })
	b.Run("cancellable", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pingPong(b, ctx)
	})
}

func pingPong(b *testing.B, ctx context.Context) {
	const n = 8
	ss := []*sink{newSink(n, true), newSink(n, true)}
	ts := startCluster(b, []transport.Handler{ss[0], ss[1]})
	h := transport.Header{Tag: 1, Len: n}
	ping, pong := make([]byte, n), make([]byte, n)
	echo := func(rounds int) {
		for range rounds {
			<-ss[1].arrived
			if err := ts[1].Send(ctx, 0, h, pong); err != nil {
				b.Error(err)
				return
			}
		}
	}
	round := func() {
		if err := ts[0].Send(ctx, 1, h, ping); err != nil {
			b.Fatal(err)
		}
		<-ss[0].arrived
	}
	go echo(1) // connect outside the timed loop
	round()
	b.SetBytes(2 * n)
	b.ReportAllocs()
	b.ResetTimer()
	go echo(b.N)
	for range b.N {
		round()
	}
}

func BenchmarkThroughput(b *testing.B) {
	for _, size := range []int{1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			s := newSink(size, false)
			ts := startCluster(b, []transport.Handler{newSink(0, false), s})
			ctx := context.Background()
			payload := make([]byte, size)
			h := transport.Header{Tag: 2, Len: size}
			s.target.Store(int64(b.N) + 1)
			if err := ts[0].Send(ctx, 1, h, payload); err != nil { // connect
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := ts[0].Send(ctx, 1, h, payload); err != nil {
					b.Fatal(err)
				}
			}
			<-s.done
		})
	}
}
