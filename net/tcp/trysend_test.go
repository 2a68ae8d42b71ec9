package tcp

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// sendOrTry sends as spmd's Isend does: TrySend first, Send if it declines.
// It reports whether TrySend took the message.
func sendOrTry(t testing.TB, tr *Transport, peer int, tag int32, payload []byte) bool {
	t.Helper()
	h := transport.Header{Comm: 7, Tag: tag, Len: len(payload)}
	ok, err := tr.TrySend(peer, h, payload)
	if err != nil {
		t.Fatalf("TrySend to rank %d: %v", peer, err)
	}
	if !ok {
		send(t, tr, peer, tag, payload)
	}
	return ok
}

func TestTrySendKeepsOrderWithSend(t *testing.T) {
	const n = 1500
	sizes := append([]int{trySendMax, trySendMax + 1, 256 << 10}, mixedSizes...)
	ts, rs := newCluster(t, 2)
	tried := 0
	for seq := range n {
		if sendOrTry(t, ts[0], 1, 1, seqPayload(0, 1, seq, sizes[seq%len(sizes)]+12)) {
			tried++
		}
	}
	for seq, m := range rs[1].WaitMsgs(t, n) {
		checkSeqPayload(t, m, 1, seq)
	}
	t.Logf("TrySend took %d of %d messages", tried, n)
	if tried == 0 {
		t.Error("TrySend took no message")
	}
}

func TestTrySendWhenTheSocketIsFull(t *testing.T) {
	const after = 10 // messages sent once the socket is full
	ts, rs := newCluster(t, 2)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rs[1].BufferFor = func(_ int, h transport.Header) []byte {
		once.Do(func() { // rank 1 reads nothing after the first header
			close(entered)
			<-release
		})
		return make([]byte, h.Len)
	}
	send(t, ts[0], 1, 2, seqPayload(0, 2, 0, 12))
	<-entered
	seq := 1
	for ; ; seq++ { // odd sizes, so that the socket likely takes a frame in part
		p := seqPayload(0, 2, seq, 1000+seq%7)
		ok, err := ts[0].TrySend(1, transport.Header{Comm: 7, Tag: 2, Len: len(p)}, p)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if seq > 1<<20 {
			t.Fatal("TrySend never found the socket full")
		}
	}
	sent := make(chan error, 1)
	go func() { // these wait for room
		for s := seq; s < seq+after; s++ {
			p := seqPayload(0, 2, s, 1000)
			if err := ts[0].Send(context.Background(), 1, transport.Header{Comm: 7, Tag: 2, Len: len(p)}, p); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	close(release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	for s, m := range rs[1].WaitMsgs(t, seq+after) {
		checkSeqPayload(t, m, 2, s)
	}
	t.Logf("TrySend took %d messages before the socket was full", seq-1)
}

func TestTrySendDeclines(t *testing.T) {
	ts, rs := newCluster(t, 3)
	small := []byte("small")
	h := transport.Header{Len: len(small)}
	for _, c := range []struct {
		name    string
		peer    int
		h       transport.Header
		payload []byte
	}{
		{"self", 0, h, small},
		{"not a rank", 5, h, small},
		{"not connected", 1, h, small},
		{"length mismatch", 2, transport.Header{Len: 1}, small},
		{"too large", 2, transport.Header{Len: trySendMax + 1}, make([]byte, trySendMax+1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.peer == 2 {
				send(t, ts[0], 2, 0, small) // connect
			}
			if ok, err := ts[0].TrySend(c.peer, c.h, c.payload); ok || err != nil {
				t.Errorf("TrySend: %v, %v; want false, nil", ok, err)
			}
		})
	}
	ts[2].Close()
	rs[0].WaitLost(t, 2)
	if ok, err := ts[0].TrySend(2, h, small); ok || err != nil {
		t.Errorf("TrySend to a lost peer: %v, %v; want false, nil", ok, err)
	}
}

func TestCloseWithTrySendPending(t *testing.T) {
	ts, rs := newCluster(t, 2)
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	rs[1].BufferFor = func(_ int, h transport.Header) []byte {
		once.Do(func() {
			close(entered)
			<-release
		})
		return make([]byte, h.Len)
	}
	send(t, ts[0], 1, 2, seqPayload(0, 2, 0, 12))
	<-entered
	for seq := 1; ; seq++ {
		p := seqPayload(0, 2, seq, 1000+seq%7)
		if ok, _ := ts[0].TrySend(1, transport.Header{Len: len(p)}, p); !ok {
			break
		}
	}
	ts[0].Close() // must not wait for a peer that reads nothing
	if err := rs[0].WaitLost(t, 1); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Lost(1) after Close: %v, want ErrClosed", err)
	}
}
