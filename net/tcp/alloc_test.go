package tcp

import (
	"context"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// tokenDone is a transport.Done that passes the outcome on.
type tokenDone chan error

func (d tokenDone) SendDone(err error) { d <- err }

// TestSendsAllocateNothing: in steady state a blocking Send, and a started
// send whether Poll or the writer goroutine writes it, allocate nothing.
// make test runs it without the race detector.
func TestSendsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it is given")
	}
	const size = 1 << 20 // more than is written at once
	s := newSink(size, true)
	ts := startCluster(t, []transport.Handler{newSink(0, false), s})
	payload := make([]byte, size)
	h := transport.Header{Tag: 1, Len: size}
	done := make(tokenDone, 1)
	ctx := context.Background()
	started := func() {
		if ok, err := ts[0].StartSend(1, h, payload, done); !ok || err != nil {
			t.Fatalf("StartSend: %v, %v", ok, err)
		}
	}
	round := func() {
		if err := ts[0].Send(ctx, 1, h, payload); err != nil {
			t.Fatal(err)
		}
		<-s.arrived
		ts[0].BeginPoll()
		started()
		for len(done) == 0 {
			ts[0].Poll()
		}
		ts[0].EndPoll()
		<-done
		<-s.arrived
		started() // the writer goroutine writes it
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		<-s.arrived
	}
	round() // connect
	if n := testing.AllocsPerRun(50, round); n > 0 {
		t.Errorf("%.1f allocations per round of three 1 MiB sends, want 0", n)
	}
}
