package shm

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

func send(tb testing.TB, tr *Transport, peer int, tag int32, payload []byte) {
	tb.Helper()
	h := transport.Header{Comm: 7, Tag: tag, Len: len(payload)}
	if err := tr.Send(context.Background(), peer, h, payload); err != nil {
		tb.Fatalf("send from rank %d to rank %d: %v", tr.rank, peer, err)
	}
}

func TestOrderPerPeer(t *testing.T) {
	c := newCluster(t, 3, WithRingSize(4096))
	const n = 300
	var wg sync.WaitGroup
	for _, from := range []int{1, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				send(t, c.ts[from], 0, int32(i), content(i, (i*37)%3000))
			}
		}()
	}
	wg.Wait()
	got := c.rs[0].WaitMsgs(t, 2*n)
	next := map[int]int{}
	for _, m := range got {
		i := next[m.Peer]
		next[m.Peer]++
		want := transport.Header{Comm: 7, Tag: int32(i), Len: (i * 37) % 3000}
		if m.Header != want || !bytes.Equal(m.Data, content(i, want.Len)) {
			t.Fatalf("message %d from rank %d: got %+v, want %+v", i, m.Peer, m.Header, want)
		}
	}
}

func TestZeroByteMessages(t *testing.T) {
	c := newCluster(t, 2)
	for i := range 5 {
		send(t, c.ts[1], 0, int32(i), nil)
	}
	for i, m := range c.rs[0].WaitMsgs(t, 5) {
		if m.Header.Len != 0 || len(m.Data) != 0 || m.Header.Tag != int32(i) {
			t.Fatalf("message %d: %+v with %d bytes", i, m.Header, len(m.Data))
		}
	}
}

func TestLargeMessage(t *testing.T) {
	const size = 64 << 20
	c := build(t, 2)
	payload := make([]byte, size)
	rand.Read(payload) // no period: a misplaced chunk cannot match
	var dst []byte     // set by rank 1's receiver, read after its Deliver
	c.rs[1].BufferFor = func(_ int, h transport.Header) []byte {
		if dst == nil {
			dst = make([]byte, h.Len)
			return dst
		}
		return make([]byte, h.Len)
	}
	c.start(t, 0)
	c.start(t, 1)
	send(t, c.ts[0], 1, 3, payload)
	send(t, c.ts[0], 1, 4, []byte("after"))
	got := c.rs[1].WaitMsgs(t, 2)
	if got[0].Header.Len != size || &got[0].Data[0] != &dst[0] || !bytes.Equal(got[0].Data, payload) {
		t.Fatalf("the %d-byte message did not land intact in the handler's buffer", size)
	}
	if string(got[1].Data) != "after" {
		t.Fatalf("next message: %q", got[1].Data)
	}
}

func TestManyTagsAmongRanks(t *testing.T) {
	const ranks, senders, each = 4, 3, 40
	c := newCluster(t, ranks, WithRingSize(8192))
	var wg sync.WaitGroup
	for from := range ranks {
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					to := (from + 1 + i%(ranks-1)) % ranks
					b := []byte(fmt.Sprintf("%d:%d:%d", from, g, i))
					send(t, c.ts[from], to, int32(g), append(b, make([]byte, i*50)...))
				}
			}()
		}
	}
	wg.Wait()
	for to := range ranks {
		want := senders * each * (ranks - 1) / (ranks - 1)
		got := c.rs[to].WaitMsgs(t, want)
		last := map[[2]int]int{}
		for _, m := range got {
			var from, g, i int
			fmt.Sscanf(string(bytes.TrimRight(m.Data, "\x00")), "%d:%d:%d", &from, &g, &i)
			k := [2]int{from, g}
			if prev, ok := last[k]; (ok && i <= prev) || from != m.Peer || int32(g) != m.Header.Tag {
				t.Fatalf("rank %d: message %q from rank %d tag %d out of order or misattributed", to, m.Data[:8], m.Peer, m.Header.Tag)
			}
			last[k] = i
		}
	}
}

func TestInFlightMessagesDeliveredAfterClose(t *testing.T) {
	c := build(t, 2, WithRingSize(1<<16))
	c.start(t, 0)
	for i := range 50 {
		send(t, c.ts[0], 1, int32(i), content(i, 1000))
	}
	c.ts[0].Close()
	c.start(t, 1) // rank 1 reads only now
	got := c.rs[1].WaitMsgs(t, 50)
	for i, m := range got {
		if m.Header.Tag != int32(i) || !bytes.Equal(m.Data, content(i, 1000)) {
			t.Fatalf("message %d: %+v", i, m.Header)
		}
	}
	checkLost(t, c.rs[1].WaitLost(t, 0), 0, errPeerClosed)
	if err := c.ts[1].Send(context.Background(), 0, transport.Header{Len: 1}, []byte{1}); err == nil {
		t.Fatal("send to a closed peer succeeded")
	}
}

func TestCloseReportsPeersAndIsIdempotent(t *testing.T) {
	c := newCluster(t, 3)
	c.ts[0].Close()
	c.ts[0].Close()
	for _, r := range []int{1, 2} {
		checkLost(t, c.rs[r].WaitLost(t, 0), 0, errPeerClosed)
	}
	if lost := c.rs[0].Losses(); len(lost) != 2 {
		t.Fatalf("Close reported %v, want ranks 1 and 2", lost)
	}
}

func TestSendErrors(t *testing.T) {
	c := build(t, 2)
	ctx := context.Background()
	one := transport.Header{Len: 1}
	if err := c.ts[0].Send(ctx, 1, one, []byte{1}); err == nil {
		t.Error("send before Start succeeded")
	}
	c.start(t, 0)
	for _, peer := range []int{0, 2, -1} {
		if err := c.ts[0].Send(ctx, peer, one, []byte{1}); err == nil {
			t.Errorf("send to rank %d succeeded", peer)
		}
	}
	if err := c.ts[0].Send(ctx, 1, one, nil); err == nil {
		t.Error("send with a wrong length succeeded")
	}
}

func TestNewRejects(t *testing.T) {
	s := newSecret()
	for _, c := range []struct {
		name  string
		job   string
		rank  int
		local []int
		size  int
		opts  []Option
	}{
		{"job id with a slash", "a/b", 0, []int{0}, 1, nil},
		{"rank outside", "j", 3, []int{3}, 2, nil},
		{"rank not local", "j", 0, []int{1}, 2, nil},
		{"duplicate local", "j", 0, []int{0, 1, 1}, 3, nil},
		{"ring not a power of two", "j", 0, []int{0, 1}, 2, []Option{WithRingSize(5000)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if tr, err := New(c.job, c.rank, c.local, c.size, s, c.opts...); err == nil {
				tr.Close()
				t.Fatal("New accepted it")
			}
		})
	}
}
