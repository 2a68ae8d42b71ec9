package spmd

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// gate is a transport whose Sends to a peer wait for a token on release;
// entered receives each Send's first byte as it begins.
type gate struct {
	entered chan byte
	release chan error
}

func (g *gate) Start(transport.Handler) error { return nil }
func (g *gate) Watch(int)                     {}
func (g *gate) Close() error                  { return nil }
func (g *gate) Send(ctx context.Context, _ int, _ transport.Header, p []byte) error {
	g.entered <- p[0]
	return <-g.release
}

// A blocking Send hands the peer's turn on to the sends that queued
// behind it, and reports its transport's error; the queued sends go out in
// order after it.
func TestBlockingSendHandsOnTheTurn(t *testing.T) {
	g := &gate{entered: make(chan byte, 4), release: make(chan error, 4)}
	e := newEngine(0, 2, g)
	ctx := context.Background()
	send := func(b byte) *Request {
		r := newRequest(e, sendReq, []byte{b})
		r.ctx, r.key = ctx, matchKey{src: 1}
		return r
	}
	blocking := send(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.isend(blocking, 1, true)
	}()
	if b := <-g.entered; b != 1 {
		t.Fatalf("the transport got message %d first, want 1", b)
	}
	queued := []*Request{send(2), send(3)}
	for _, r := range queued {
		e.isend(r, 1, false) // the turn is the blocking Send's: they queue
	}
	lost := transport.Lost(1, "gate", errors.New("gone"))
	g.release <- lost
	<-done
	if n, err := blocking.Wait(ctx); n != 0 || !errors.Is(err, lost) {
		t.Errorf("the blocking Send returned %d, %v; want 0 and its transport's error", n, err)
	}
	for i, r := range queued {
		select {
		case b := <-g.entered:
			if want := byte(i + 2); b != want {
				t.Fatalf("the transport got message %d, want %d", b, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("message %d was not handed the turn", i+2)
		}
		g.release <- nil
		if n, err := r.Wait(ctx); n != 1 || err != nil {
			t.Errorf("queued send %d: %d, %v", i+2, n, err)
		}
	}
}

// trier is a transport whose TrySend takes 1-byte messages at once and
// whose Send fails once its context has ended, as the real ones do; it
// records what it sent.
type trier struct {
	mu   sync.Mutex
	sent [][]byte
}

func (t *trier) Start(transport.Handler) error { return nil }
func (t *trier) Watch(int)                     {}
func (t *trier) Close() error                  { return nil }
func (t *trier) Send(ctx context.Context, _ int, _ transport.Header, p []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	t.sent = append(t.sent, p)
	t.mu.Unlock()
	return nil
}
func (t *trier) TrySend(_ int, _ transport.Header, p []byte) (bool, error) {
	if len(p) != 1 {
		return false, nil
	}
	t.mu.Lock()
	t.sent = append(t.sent, p)
	t.mu.Unlock()
	return true, nil
}

// Once a send has failed because its context ended, a later send of the
// same context fails too, whichever path it would take, so that what
// reaches the peer is a prefix of what was sent. Before, the TrySend path
// (and StartSend's) took no context: a large send failed and the small
// one after it went out, and the receiver matched it in the first one's
// place (a ring all-reduce's receive failed with ErrTruncated where its
// sender had been aborted).
func TestEndedContextLeavesNoHole(t *testing.T) {
	tr := &trier{}
	e := newEngine(0, 2, tr)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	send := func(n int) *Request {
		r := newRequest(e, sendReq, make([]byte, n))
		r.ctx, r.key = ctx, matchKey{src: 1}
		e.isend(r, 1, false)
		return r
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	for _, n := range []int{2, 1, 2, 1} {
		if _, err := send(n).Wait(wctx); !errors.Is(err, context.Canceled) {
			t.Errorf("a %d-byte send of an ended context: %v, want context.Canceled", n, err)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.sent) != 0 {
		t.Errorf("the transport sent %d messages of an ended context", len(tr.sent))
	}
}

// startGate is a gate whose StartSend starts every message at once and
// records it.
type startGate struct {
	gate
	mu      sync.Mutex
	started int
}

func (g *startGate) StartSend(_ int, _ transport.Header, _ []byte, done transport.Done) (bool, error) {
	g.mu.Lock()
	g.started++
	g.mu.Unlock()
	done.SendDone(nil)
	return true, nil
}

// A send that queued behind another and whose context ended meanwhile
// fails when its turn comes, rather than being started: StartSend takes
// no context.
func TestEndedContextInQueue(t *testing.T) {
	g := &startGate{gate: gate{entered: make(chan byte, 4), release: make(chan error, 4)}}
	e := newEngine(0, 2, g)
	blocking := newRequest(e, sendReq, []byte{1})
	blocking.ctx, blocking.key = context.Background(), matchKey{src: 1}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.isend(blocking, 1, true)
	}()
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	queued := newRequest(e, sendReq, []byte{2})
	queued.ctx, queued.key = ctx, matchKey{src: 1}
	e.isend(queued, 1, false)
	cancel()
	g.release <- nil
	<-done
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := queued.Wait(wctx); !errors.Is(err, context.Canceled) {
		t.Errorf("the queued send of an ended context: %v, want context.Canceled", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started != 0 {
		t.Errorf("the transport started %d sends of an ended context", g.started)
	}
}
