package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
	"golang.org/x/sys/unix"
)

// The paths by which a Handler call can come.
const (
	viaPoll   = "Poll"
	viaDrain  = "EndPoll"
	viaReader = "reader goroutine"
)

// tracer is a Recorder that also notes the path of every Handler call and
// checks that no two calls for one peer overlap.
type tracer struct {
	*transporttest.Recorder
	busy     []atomic.Int32 // by peer: calls in progress
	overlaps atomic.Int32

	mu    sync.Mutex // protects following
	paths map[string]int
	lost  []string // path of each Lost
}

func newTracer(ranks int) *tracer {
	return &tracer{Recorder: transporttest.NewRecorder(), busy: make([]atomic.Int32, ranks), paths: map[string]int{}}
}

func (h *tracer) Buffer(peer int, hd transport.Header) []byte {
	defer h.enter(peer)()
	return h.Recorder.Buffer(peer, hd)
}

func (h *tracer) Deliver(peer int, hd transport.Header, p []byte) {
	defer h.enter(peer)()
	path := callPath()
	h.mu.Lock()
	h.paths[path]++
	h.mu.Unlock()
	h.Recorder.Deliver(peer, hd, p)
}

func (h *tracer) Lost(peer int, err error) {
	defer h.enter(peer)()
	path := callPath()
	h.mu.Lock()
	h.lost = append(h.lost, path)
	h.mu.Unlock()
	h.Recorder.Lost(peer, err)
}

func (h *tracer) enter(peer int) (leave func()) {
	if h.busy[peer].Add(1) != 1 {
		h.overlaps.Add(1)
	}
	return func() { h.busy[peer].Add(-1) }
}

// delivered returns how many messages came by path.
func (h *tracer) delivered(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paths[path]
}

func (h *tracer) lostVia() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lost...)
}

func (h *tracer) check(t *testing.T) {
	t.Helper()
	h.CheckRules(t)
	if n := h.overlaps.Load(); n > 0 {
		t.Errorf("%d Handler calls overlapped another call for the same peer", n)
	}
}

// callPath names the path of the calling Handler method from its stack.
func callPath() string {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(3, pc)])
	for {
		f, more := frames.Next()
		switch {
		case strings.HasSuffix(f.Function, "net/tcp.(*Transport).Poll"):
			return viaPoll
		case strings.HasSuffix(f.Function, "net/tcp.(*Transport).EndPoll"):
			return viaDrain
		case strings.HasSuffix(f.Function, "net/tcp.(*reader).run"):
			return viaReader
		}
		if !more {
			return "unknown"
		}
	}
}

// pollOnly returns the transport of rank 0 of two, not started, whose link
// to rank 1 is the accepted end of a loopback connection with no reader
// goroutine: only Poll and EndPoll read it. The dialed end, returned,
// stands for rank 1 and writes raw frames.
func pollOnly(t *testing.T) (*Transport, *tracer, *net.TCPConn) {
	t.Helper()
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := New(l, 0, []string{l.Addr(), "127.0.0.1:1"}, testSecret)
	h := newTracer(2)
	tr.handler = h
	raw, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tr.Close()
		c.Close()
		raw.Close()
		h.check(t)
	})
	p := tr.peers[1]
	p.mu.Lock()
	p.conn.Store(c)
	p.state = up
	close(p.ready)
	p.mu.Unlock()
	r, err := newReader(p, c)
	if err != nil {
		t.Fatal(err)
	}
	p.rd.Store(r)
	return tr, h, raw.(*net.TCPConn)
}

// frame encodes one message as it goes on the wire.
func frame(tag int32, payload []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(payload))
	putHeader(b, transport.Header{Comm: 7, Tag: tag, Len: len(payload)})
	return append(b, payload...)
}

// waitQueued waits until tr's end of its link to peer holds at least n
// unread bytes.
func waitQueued(t *testing.T, tr *Transport, peer, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d bytes from rank %d", n, peer), func() bool { return queued(t, tr, peer) >= n })
}

// queued returns how many unread bytes tr's end of its link to peer holds.
// held returns how many bytes of the stream from peer tr's reader has
// taken from the socket but not yet delivered.
func held(tr *Transport, peer int) int {
	r := tr.peers[peer].rd.Load()
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.dec.w - r.dec.r
	if r.dec.body {
		n += headerSize + r.dec.got
	}
	return n
}

func queued(t *testing.T, tr *Transport, peer int) int {
	t.Helper()
	c := tr.peers[peer].conn.Load()
	if c == nil {
		return 0
	}
	q := 0
	rc, err := c.SyscallConn()
	if err == nil {
		rc.Control(func(fd uintptr) { q, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// waitFor waits until cond holds; waitLimit is a hang guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); !cond(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// pollUntil polls tr until cond holds.
func pollUntil(t testing.TB, tr *Transport, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); !cond(); {
		if !tr.Poll() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out polling for %s", what)
			}
			runtime.Gosched()
		}
	}
}

var mixedSizes = []int{12, 0, 13, 100, 1000, 70 << 10, 3, 4096, 200 << 10, 64 << 10}

func TestPollDelivers(t *testing.T) {
	const n = 300
	tr, h, raw := pollOnly(t)
	tr.BeginPoll()
	wrote := make(chan error, 1)
	go func() { // the writes block until Poll makes room
		for seq := range n {
			if _, err := raw.Write(frame(1, seqPayload(1, 1, seq, mixedSizes[seq%len(mixedSizes)]))); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	pollUntil(t, tr, "all messages", func() bool { return h.Count() == n })
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	tr.EndPoll()
	for seq, m := range h.Msgs() {
		checkSeqPayload(t, m, 1, seq)
	}
	if got := h.delivered(viaPoll); got != n {
		t.Errorf("%d of %d messages delivered by Poll", got, n)
	}
}

func TestPollFrameInPieces(t *testing.T) {
	const size = 1 << 20
	tr, h, raw := pollOnly(t)
	recv := make([]byte, size)
	h.BufferFor = func(int, transport.Header) []byte { return recv }
	stream := frame(5, seqPayload(1, 5, 0, size))
	var cuts []int // the header in three pieces, then odd-sized pieces
	for _, c := range []int{7, 13, headerSize, headerSize + 1, headerSize + 100} {
		cuts = append(cuts, c)
	}
	for c := headerSize + 100 + 16411; c < len(stream); c += 16411 {
		cuts = append(cuts, c)
	}
	cuts = append(cuts, len(stream))
	tr.BeginPoll()
	defer tr.EndPoll()
	from, polls := 0, 0
	for _, to := range cuts {
		if _, err := raw.Write(stream[from:to]); err != nil {
			t.Fatal(err)
		}
		waitQueued(t, tr, 1, to-from)
		if to == len(stream) {
			break
		}
		// Each piece is progress (Poll reads it), but no message.
		for queued(t, tr, 1) > 0 {
			if !tr.Poll() {
				t.Fatalf("Poll read nothing of %d bytes waiting in the socket", queued(t, tr, 1))
			}
			polls++
		}
		if tr.Poll() {
			t.Fatalf("Poll reported progress with the socket empty after %d of %d bytes", to, len(stream))
		}
		if n := h.Count(); n != 0 {
			t.Fatalf("a message delivered after %d of %d bytes", to, len(stream))
		}
		from = to
	}
	pollUntil(t, tr, "the message", func() bool { return h.Count() == 1 })
	m := h.Msgs()[0]
	checkSeqPayload(t, m, 5, 0)
	if &m.Data[0] != &recv[0] {
		t.Error("the payload did not land in the Handler's buffer")
	}
	t.Logf("%d pieces, %d polls", len(cuts), polls)
}

// TestEndPollDrains checks what the last EndPoll reads: what the reader
// goroutine left to the pollers, and the rest of a stream whose last read
// filled the read buffer, but not bytes that nobody has looked at, which
// are the reader goroutine's (the netpoller wakes it for them).
func TestEndPollDrains(t *testing.T) {
	const n = 50
	stream := func(size int) []byte {
		var b []byte
		for seq := range n {
			b = append(b, frame(2, seqPayload(1, 2, seq, size+seq))...)
		}
		return b
	}
	check := func(t *testing.T, h *tracer) {
		t.Helper()
		for seq, m := range h.Msgs() {
			checkSeqPayload(t, m, 2, seq)
		}
	}

	// polling starts a poller and puts n small messages in the socket.
	polling := func(t *testing.T) (*Transport, *tracer, []byte) {
		t.Helper()
		tr, h, raw := pollOnly(t)
		b := stream(12)
		tr.BeginPoll()
		if _, err := raw.Write(b); err != nil {
			t.Fatal(err)
		}
		waitQueued(t, tr, 1, len(b))
		return tr, h, b
	}

	t.Run("left by the reader goroutine", func(t *testing.T) {
		tr, h, _ := polling(t)
		// The reader goroutine wakes for the bytes, finds a poller at
		// work and leaves them to it.
		if tr.peers[1].rd.Load().serve(0) {
			t.Fatal("serve reported the link lost")
		}
		tr.EndPoll()
		if got := h.delivered(viaDrain); got != n {
			t.Fatalf("EndPoll delivered %d of the %d messages left to the pollers", got, n)
		}
		check(t, h)
	})

	t.Run("rest of a full read", func(t *testing.T) {
		tr, h, raw := pollOnly(t)
		b := stream(4 << 10) // 200 KiB: more than a read buffer
		tr.BeginPoll()
		go raw.Write(b) // what the socket does not take waits for reads
		// A read buffer and two frames: Poll's one read fills its buffer
		// and leaves at least one whole frame behind.
		waitQueued(t, tr, 1, readBufferSize+8<<10)
		if !tr.Poll() {
			t.Fatal("Poll read nothing")
		}
		polled := h.Count()
		tr.EndPoll()
		if h.delivered(viaDrain) == 0 {
			t.Fatalf("EndPoll delivered nothing after a Poll that filled its buffer (%d messages by Poll, %d bytes in the socket)", polled, queued(t, tr, 1))
		}
		check(t, h)
	})

	t.Run("nobody looked", func(t *testing.T) {
		tr, h, b := polling(t)
		tr.EndPoll()
		if got := h.Count(); got != 0 {
			t.Fatalf("EndPoll read %d messages that only arrived, with no read of its poller ahead of them full", got)
		}
		if q := queued(t, tr, 1); q != len(b) {
			t.Fatalf("%d of %d bytes left in the socket", q, len(b))
		}
	})
}

func TestPollFindsLoss(t *testing.T) {
	const n = 3
	for _, c := range []struct {
		name  string
		tail  []byte // written after n good frames, before the close
		cause error
	}{
		{"clean close", nil, errPeerClosed},
		{"close mid-header", frame(1, nil)[:5], io.ErrUnexpectedEOF},
		{"close mid-payload", frame(1, make([]byte, 100))[:headerSize+50], io.ErrUnexpectedEOF},
		{"malformed header", append([]byte("HTTP/1.1 200 OK\r\n\r\n"), make([]byte, headerSize)...), errMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, h, raw := pollOnly(t)
			var stream []byte
			for seq := range n {
				stream = append(stream, frame(3, seqPayload(1, 3, seq, 40))...)
			}
			if _, err := raw.Write(append(stream, c.tail...)); err != nil {
				t.Fatal(err)
			}
			raw.Close()
			tr.BeginPoll()
			pollUntil(t, tr, "the loss", func() bool { return len(h.Losses()) > 0 })
			for range 10 {
				if tr.Poll() {
					t.Fatal("Poll moved something after the loss")
				}
			}
			tr.EndPoll()
			err := h.Losses()[1]
			if !errors.Is(err, transport.ErrPeerLost) || !errors.Is(err, c.cause) {
				t.Errorf("loss error %v: want ErrPeerLost and %v", err, c.cause)
			}
			if got := h.Count(); got != n {
				t.Errorf("%d of %d complete messages delivered before the loss", got, n)
			}
			if via := h.lostVia(); len(via) != 1 || via[0] != viaPoll {
				t.Errorf("Lost reported by %v, want once by Poll", via)
			}
			if _, err := tr.peers[1].conn.Load().Write([]byte{0}); !errors.Is(err, net.ErrClosed) {
				t.Errorf("write on the lost link: %v, want net.ErrClosed", err)
			}
		})
	}
}

// polling drives tr from a goroutine of its own, in sessions of at most
// budget polls, until stop is closed.
func polling(tr *Transport, budget int, stop chan struct{}) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			tr.BeginPoll()
			for i := 0; i < budget; i++ {
				if !tr.Poll() {
					runtime.Gosched()
				}
			}
			tr.EndPoll()
		}
	}()
	return done
}

func TestPollAndReaderAlternate(t *testing.T) {
	const batches, perBatch = 20, 200 // each batch is over 1 MiB
	hs := []*tracer{newTracer(2), newTracer(2)}
	t.Cleanup(func() { hs[1].check(t) })
	ts := startCluster(t, []transport.Handler{hs[0], hs[1]})
	seq := 0
	sendBatch := func() chan error {
		sent := make(chan error, 1)
		first := seq
		seq += perBatch
		go func() {
			for s := first; s < first+perBatch; s++ {
				h := transport.Header{Comm: 7, Tag: 1, Len: mixedSizes[s%len(mixedSizes)] + 12}
				if err := ts[0].Send(t.Context(), 1, h, seqPayload(0, 1, s, h.Len)); err != nil {
					sent <- err
					return
				}
			}
			sent <- nil
		}()
		return sent
	}
	for b := range batches {
		sent := sendBatch()
		if b%2 == 0 {
			hs[1].WaitMsgs(t, seq)
		} else {
			ts[1].BeginPoll()
			pollUntil(t, ts[1], "a batch", func() bool { return hs[1].Count() == seq })
			ts[1].EndPoll()
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	for s, m := range hs[1].WaitMsgs(t, seq) {
		checkSeqPayload(t, m, 1, s)
	}
	byPoll, byReader := hs[1].delivered(viaPoll), hs[1].delivered(viaReader)
	t.Logf("%d messages: %d by Poll, %d by EndPoll, %d by the reader goroutine", seq, byPoll, hs[1].delivered(viaDrain), byReader)
	if byPoll == 0 || byReader == 0 {
		t.Errorf("Poll delivered %d messages and the reader goroutine %d; want both", byPoll, byReader)
	}
}

func TestEndPollLeavesDataToReader(t *testing.T) {
	const rounds = 200
	hs := []*tracer{newTracer(2), newTracer(2)}
	t.Cleanup(func() { hs[1].check(t) })
	ts := startCluster(t, []transport.Handler{hs[0], hs[1]})
	want := 0
	for r := range rounds {
		ts[1].BeginPoll()
		size := mixedSizes[r%len(mixedSizes)] + 12
		sent := make(chan error, 1)
		go func() {
			sent <- ts[0].Send(t.Context(), 1, transport.Header{Comm: 7, Tag: 4, Len: size}, seqPayload(0, 4, r, size))
		}()
		// Let the data reach the socket first, so that the reader goroutine
		// finds pollers at work when it wakes (unless it was still reading
		// and took it), and sometimes leave a frame half-read.
		// The reader goroutine may have taken part of the frame before it
		// saw the pollers: count what it holds too (first, so that a read
		// between the two looks can only undercount).
		waitFor(t, "the data", func() bool {
			h := held(ts[1], 0)
			return h+queued(t, ts[1], 0) >= min(size+headerSize, 32<<10) || hs[1].Count() > want
		})
		if r%3 == 0 {
			ts[1].Poll()
		}
		ts[1].EndPoll()
		want++
		hs[1].WaitMsgs(t, want) // a lost wake-up hangs here
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
	}
	for r, m := range hs[1].Msgs() {
		checkSeqPayload(t, m, 4, r)
	}
}

func TestPollLossWhilePolling(t *testing.T) {
	const n = 100
	for _, c := range linkKillers {
		t.Run(c.name, func(t *testing.T) {
			hs := []*tracer{newTracer(2), newTracer(2)}
			t.Cleanup(func() { hs[1].check(t) })
			ts := startCluster(t, []transport.Handler{hs[0], hs[1]})
			stop := make(chan struct{})
			done := polling(ts[1], 1000, stop)
			for seq := range n {
				send(t, ts[0], 1, 6, seqPayload(0, 6, seq, mixedSizes[seq%len(mixedSizes)]+12))
			}
			c.kill(ts[0])
			err := hs[1].WaitLost(t, 0)
			close(stop)
			<-done
			checkLostRank(t, err, 0, ts[0].ln.Addr())
			if got := hs[1].Count(); got != n {
				t.Errorf("%d of %d messages delivered before the loss", got, n)
			}
			for seq, m := range hs[1].Msgs() {
				checkSeqPayload(t, m, 6, seq)
			}
			t.Logf("Lost reported by %v", hs[1].lostVia())
		})
	}
}

func TestConcurrentPollers(t *testing.T) {
	const ranks, perPeer, pollers = 4, 1500, 3
	hs := make([]transport.Handler, ranks)
	for i := range hs {
		hs[i] = newTracer(ranks)
	}
	recv := hs[0].(*tracer)
	t.Cleanup(func() { recv.check(t) })
	ts := startCluster(t, hs)
	stop := make(chan struct{})
	var done []chan struct{}
	for i := range pollers {
		done = append(done, polling(ts[0], 10+i*50, stop))
	}
	var wg sync.WaitGroup
	for src := 1; src < ranks; src++ {
		wg.Go(func() {
			for seq := range perPeer {
				send(t, ts[src], 0, 8, seqPayload(src, 8, seq, mixedSizes[(seq+src)%len(mixedSizes)]+12))
			}
		})
	}
	wg.Wait()
	msgs := recv.WaitMsgs(t, (ranks-1)*perPeer)
	close(stop)
	for _, d := range done {
		<-d
	}
	next := map[int]int{}
	for _, m := range msgs {
		checkSeqPayload(t, m, 8, next[m.Peer])
		next[m.Peer]++
	}
	t.Logf("%d messages: %d by Poll, %d by EndPoll, %d by the reader goroutines", len(msgs),
		recv.delivered(viaPoll), recv.delivered(viaDrain), recv.delivered(viaReader))
}

func TestPollBeforeStartAndAfterClose(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := New(l, 0, []string{l.Addr(), "127.0.0.1:1"}, testSecret)
	tr.BeginPoll()
	if tr.Poll() {
		t.Error("Poll moved something before Start")
	}
	tr.EndPoll()
	tr.Close()
	tr.BeginPoll()
	if tr.Poll() {
		t.Error("Poll moved something after Close")
	}
	tr.EndPoll()
}
