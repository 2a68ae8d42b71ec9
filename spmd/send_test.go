package spmd

import (
	"context"
	"errors"
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
