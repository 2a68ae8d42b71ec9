package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// seqPayload makes a payload of n bytes (at least 12) that carries its
// source, tag and sequence number.
func seqPayload(src, tag, seq, n int) []byte {
	b := make([]byte, max(n, 12))
	binary.LittleEndian.PutUint32(b[0:], uint32(src))
	binary.LittleEndian.PutUint32(b[4:], uint32(tag))
	binary.LittleEndian.PutUint32(b[8:], uint32(seq))
	for i := 12; i < len(b); i++ {
		b[i] = byte(seq + i)
	}
	return b
}

func checkSeqPayload(t *testing.T, m transporttest.Msg, tag, seq int) {
	t.Helper()
	want := seqPayload(m.Peer, tag, seq, len(m.Data))
	if m.Header.Tag != int32(tag) || string(m.Data) != string(want) {
		t.Fatalf("from rank %d: got tag %d, %d bytes (seq %d); want tag %d seq %d",
			m.Peer, m.Header.Tag, len(m.Data), binary.LittleEndian.Uint32(m.Data[8:]), tag, seq)
	}
}

func send(t testing.TB, tr *Transport, peer int, tag int32, payload []byte) {
	t.Helper()
	h := transport.Header{Comm: 7, Tag: tag, Len: len(payload)}
	if err := tr.Send(context.Background(), peer, h, payload); err != nil {
		t.Fatalf("send to rank %d: %v", peer, err)
	}
}

func TestOrderingPerPeer(t *testing.T) {
	const perPeer = 2000
	ts, rs := newCluster(t, 3)
	sizes := []int{12, 13, 100, 1000, 70 << 10, 0, 3}
	var wg sync.WaitGroup
	for src := 1; src < 3; src++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range perPeer {
				send(t, ts[src], 0, 1, seqPayload(src, 1, seq, sizes[seq%len(sizes)]))
			}
		}()
	}
	wg.Wait()
	next := map[int]int{}
	for _, m := range rs[0].WaitMsgs(t, 2*perPeer) {
		if m.Header.Comm != 7 {
			t.Fatalf("comm %d, want 7", m.Header.Comm)
		}
		checkSeqPayload(t, m, 1, next[m.Peer])
		next[m.Peer]++
	}
}

func TestZeroByteMessages(t *testing.T) {
	ts, rs := newCluster(t, 2)
	payloads := [][]byte{nil, {}, []byte("x"), nil, make([]byte, 100), {}}
	for i, p := range payloads {
		send(t, ts[0], 1, int32(i), p)
	}
	got := rs[1].WaitMsgs(t, len(payloads))
	for i, m := range got {
		if m.Header.Tag != int32(i) || m.Header.Len != len(payloads[i]) || len(m.Data) != len(payloads[i]) {
			t.Errorf("message %d: tag %d, %d bytes; want tag %d, %d bytes", i, m.Header.Tag, m.Header.Len, i, len(payloads[i]))
		}
	}
}

func TestManyTagsManyRanks(t *testing.T) {
	const ranks, tags, perTag = 4, 4, 100
	ts, rs := newCluster(t, ranks)
	var wg sync.WaitGroup
	for src := range ranks {
		for dst := range ranks {
			for tag := range tags {
				if src == dst {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for seq := range perTag {
						send(t, ts[src], dst, int32(tag), seqPayload(src, tag, seq, 12+seq*tag))
					}
				}()
			}
		}
	}
	wg.Wait()
	for dst, r := range rs {
		next := map[[2]int]int{}
		for _, m := range r.WaitMsgs(t, (ranks-1)*tags*perTag) {
			k := [2]int{m.Peer, int(m.Header.Tag)}
			checkSeqPayload(t, m, k[1], next[k])
			next[k]++
		}
		if len(next) != (ranks-1)*tags {
			t.Errorf("rank %d heard from %d (source, tag) pairs, want %d", dst, len(next), (ranks-1)*tags)
		}
	}
}

func TestOneGiBMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 1 GiB")
	}
	const n = 1 << 30
	ts, rs := newCluster(t, 2)
	recv := make([]byte, n)
	rs[1].BufferFor = func(int, transport.Header) []byte { return recv }
	payload := make([]byte, n)
	offsets := []int{0, 1, 4095, 1 << 20, n/2 + 3, n - 2, n - 1}
	for i, off := range offsets {
		payload[off] = byte(i + 1)
	}
	send(t, ts[0], 1, 3, payload)
	m := rs[1].WaitMsgs(t, 1)[0]
	if m.Header.Len != n || len(m.Data) != n {
		t.Fatalf("got %d bytes, want %d", m.Header.Len, n)
	}
	for i, off := range offsets {
		if recv[off] != byte(i+1) {
			t.Errorf("byte %d is %d, want %d", off, recv[off], i+1)
		}
	}
}

func TestSendAfterClose(t *testing.T) {
	ts, rs := newCluster(t, 3)
	send(t, ts[0], 1, 0, []byte("hello"))
	rs[1].WaitMsgs(t, 1)
	ts[0].Close()
	ts[0].Close() // idempotent
	err := ts[0].Send(context.Background(), 1, transport.Header{Len: 1}, []byte{1})
	var pe *transport.PeerError
	if !errors.Is(err, transport.ErrClosed) || !errors.As(err, &pe) || pe.Rank != 1 {
		t.Fatalf("send after close: %v, want a PeerError for rank 1 wrapping ErrClosed", err)
	}
	for _, peer := range []int{1, 2} { // 1 was connected, 2 never
		err := rs[0].WaitLost(t, peer)
		if !errors.Is(err, transport.ErrClosed) || !errors.As(err, &pe) || pe.Rank != peer {
			t.Errorf("Lost(%d) after close: %v, want a PeerError wrapping ErrClosed", peer, err)
		}
	}
	if err := rs[1].WaitLost(t, 0); !errors.Is(err, transport.ErrPeerLost) {
		t.Errorf("rank 1 saw rank 0 go with %v, want ErrPeerLost", err)
	}
}

func TestCleanExitDeliversEverything(t *testing.T) {
	const n = 500
	ts, rs := newCluster(t, 2)
	for seq := range n {
		send(t, ts[1], 0, 2, seqPayload(1, 2, seq, 1000))
	}
	ts[1].Close()
	err := rs[0].WaitLost(t, 1)
	if got := rs[0].Count(); got != n {
		t.Fatalf("%d of %d messages delivered before Lost(1): %v", got, n, err)
	}
	for seq, m := range rs[0].WaitMsgs(t, n) {
		checkSeqPayload(t, m, 2, seq)
	}
}

func TestBadUse(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bad := New(l, 2, []string{"a", "b"}, testSecret)
	if err := bad.Start(transporttest.NewRecorder()); err == nil {
		t.Error("Start with rank 2 of 2 succeeded")
	}
	bad.Close()

	ts, _ := newCluster(t, 2)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		peer int
		h    transport.Header
		p    []byte
	}{
		{"self", 0, transport.Header{}, nil},
		{"negative rank", -1, transport.Header{}, nil},
		{"rank out of range", 2, transport.Header{}, nil},
		{"length mismatch", 1, transport.Header{Len: 3}, []byte{1}},
	} {
		if err := ts[0].Send(ctx, c.peer, c.h, c.p); err == nil {
			t.Errorf("%s: Send succeeded", c.name)
		}
	}
}
