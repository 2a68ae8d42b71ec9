package tcp

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

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
// background context and with one that can be cancelled (a Send whose
// frame must wait for room then waits on the context too), and with the waiting goroutines polling, as
// spmd's Request.Wait does, instead of waiting for the reader goroutines.
// Polling pays off between processes, where waking a goroutine costs an
// OS scheduling delay; here both ends share one Go scheduler, whose
// wake-ups are cheap, so "polled" guards the polling path rather than
// showing its gain, and it suffers most from other load on the host.
func BenchmarkPingPong8B(b *testing.B) {
	b.Run("background", func(b *testing.B) { pingPong(b, context.Background(), awaitArrival) })
	b.Run("cancellable", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pingPong(b, ctx, awaitArrival)
	})
	b.Run("polled", func(b *testing.B) { pingPong(b, context.Background(), pollArrival) })
}

// awaitArrival waits for the next message that s receives through tr.
func awaitArrival(_ *Transport, s *sink) { <-s.arrived }

// pollArrival polls tr until s receives the next message, for at most
// 100 us as spmd's Request.Wait does (spinning longer only loses the core
// to whatever else runs), and then waits for the reader goroutine.
func pollArrival(tr *Transport, s *sink) {
	tr.BeginPoll()
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case <-s.arrived:
			tr.EndPoll()
			return
		default:
		}
		if !tr.Poll() {
			if i%8 == 0 && time.Since(start) > 100*time.Microsecond {
				break
			}
			runtime.Gosched()
		}
	}
	tr.EndPoll()
	<-s.arrived
}

func pingPong(b *testing.B, ctx context.Context, await func(*Transport, *sink)) {
	const n = 8
	ss := []*sink{newSink(n, true), newSink(n, true)}
	ts := startCluster(b, []transport.Handler{ss[0], ss[1]})
	h := transport.Header{Tag: 1, Len: n}
	ping, pong := make([]byte, n), make([]byte, n)
	echo := func(rounds int) {
		for range rounds {
			await(ts[1], ss[1])
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
		await(ts[0], ss[0])
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
