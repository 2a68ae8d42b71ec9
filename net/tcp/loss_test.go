package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// stallReceiver makes r's Buffer block until release is closed, after
// signalling entered, so that a large message stays half-sent.
func stallReceiver(r *transporttest.Recorder) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	r.BufferFor = func(_ int, h transport.Header) []byte {
		close(entered)
		<-release
		return make([]byte, h.Len)
	}
	return entered, release
}

// sendAsync sends n bytes from tr to peer in a goroutine and returns its
// result channel.
func sendAsync(ctx context.Context, tr *Transport, peer, n int) chan error {
	done := make(chan error, 1)
	go func() {
		done <- tr.Send(ctx, peer, transport.Header{Tag: 9, Len: n}, make([]byte, n))
	}()
	return done
}

// linkKillers end rank 0's link to rank 1 in the two ways a loss starts:
// the transport closes, or the connection alone does.
var linkKillers = []struct {
	name string
	kill func(*Transport)
}{
	{"transport closed", func(tr *Transport) { tr.Close() }},
	{"connection closed", func(tr *Transport) { tr.peers[1].conn.Load().Close() }},
}

func checkLostRank(t *testing.T, err error, rank int, addr string) {
	t.Helper()
	var pe *transport.PeerError
	if !errors.Is(err, transport.ErrPeerLost) || !errors.As(err, &pe) || pe.Rank != rank || pe.Addr != addr {
		t.Fatalf("loss error %v: want a PeerError for rank %d at %s wrapping ErrPeerLost", err, rank, addr)
	}
}

func TestPeerDiesMidMessage(t *testing.T) {
	const big = 64 << 20 // far more than loopback socket buffers hold
	for _, c := range linkKillers {
		t.Run(c.name, func(t *testing.T) {
			ts, rs := newCluster(t, 2)
			entered, release := stallReceiver(rs[1])
			sent := sendAsync(context.Background(), ts[0], 1, big)
			<-entered
			go c.kill(ts[0])
			if err := <-sent; err == nil {
				t.Fatal("send of a half-received message succeeded after its sender died")
			}
			close(release)
			err := rs[1].WaitLostWithin(t, 2*time.Second, 0)
			checkLostRank(t, err, 0, ts[0].ln.Addr())
			if n := rs[1].Count(); n != 0 {
				t.Errorf("%d messages delivered from a truncated stream", n)
			}
		})
	}
}

// A blocking Send whose context ends half-way through its frame returns
// nil at once: the rest goes from a copy, the message arrives whole, and
// the link stays up. It used to drop the link and report the peer lost.
func TestSendCancelledMidFrame(t *testing.T) {
	ts, rs := newCluster(t, 2)
	entered, release := stallFirst(rs[1])
	send(t, ts[0], 1, 6, seqPayload(0, 6, 0, 12))
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	payload := seqPayload(0, 6, 1, 64<<20)
	res := make(chan error, 1)
	go func() { res <- ts[0].Send(ctx, 1, transport.Header{Comm: 7, Tag: 6, Len: len(payload)}, payload) }()
	waitHalfWritten(t, ts[0].peers[1])
	cancel()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("Send cancelled half-way: %v, want nil (sent from a copy)", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Send cancelled half-way did not return while its receiver was stalled")
	}
	clear(payload)
	close(release)
	send(t, ts[0], 1, 6, seqPayload(0, 6, 2, 1000))
	for seq, m := range rs[1].WaitMsgs(t, 3) {
		checkSeqPayload(t, m, 6, seq)
	}
}

func TestSendWithDoneContext(t *testing.T) {
	ts, rs := newCluster(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ts[0].Send(ctx, 1, transport.Header{Len: 1}, []byte{1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("send with a cancelled context: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := ts[0].Send(ctx, 1, transport.Header{Len: 1}, []byte{1}); err != nil {
		t.Fatalf("the link should be intact: %v", err)
	}
	rs[1].WaitMsgs(t, 1)
}

func TestWatchNoticesDeath(t *testing.T) {
	ts, rs := newCluster(t, 3)
	ts[0].Watch(1)
	ts[2].Watch(0)
	for ts[0].peers[1].conn.Load() == nil || ts[2].peers[0].conn.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	ts[1].Close()
	checkLostRank(t, rs[0].WaitLost(t, 1), 1, ts[1].ln.Addr())
	ts[0].Close()
	checkLostRank(t, rs[2].WaitLost(t, 0), 0, ts[0].ln.Addr())
}

func TestDialFailure(t *testing.T) {
	// A port that was just free: nothing listens there.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := New(l, 0, []string{l.Addr(), deadAddr, deadAddr}, testSecret, WithDialTimeout(200*time.Millisecond))
	r := transporttest.NewRecorder()
	if err := tr.Start(r); err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Watch(2)
	err = tr.Send(context.Background(), 1, transport.Header{Len: 1}, []byte{1})
	checkLostRank(t, err, 1, deadAddr)
	if got := r.WaitLost(t, 1); got != err {
		t.Errorf("Lost(1) got %v, Send returned %v; want the same error", got, err)
	}
	checkLostRank(t, r.WaitLost(t, 2), 2, deadAddr)
	r.CheckRules(t)
}

func TestMalformedFrameDropsPeer(t *testing.T) {
	for _, c := range []struct {
		name string
		hdr  func([]byte)
	}{
		{"bad magic", func(b []byte) { copy(b, "HTTP") }},
		{"absurd length", func(b []byte) { binary.LittleEndian.PutUint64(b[12:], 1<<62) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, rs := newCluster(t, 2)
			send(t, ts[0], 1, 0, []byte("fine"))
			rs[1].WaitMsgs(t, 1)
			b := make([]byte, headerSize)
			putHeader(b, transport.Header{Len: 4})
			c.hdr(b)
			ts[0].peers[1].conn.Load().Write(append(b, "junk"...))
			err := rs[1].WaitLost(t, 0)
			checkLostRank(t, err, 0, ts[0].ln.Addr())
			if !errors.Is(err, errMalformed) {
				t.Errorf("loss error %v: want errMalformed", err)
			}
			if n := rs[1].Count(); n != 1 {
				t.Errorf("%d messages delivered, want only the first", n)
			}
		})
	}
}
