package tcp

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// doneRec is a transport.Done that records every call, so that a test can
// check that each started send is told exactly once.
type doneRec struct {
	mu    sync.Mutex
	calls int
	err   error
	ch    chan struct{} // closed at the first call
}

func newDone() *doneRec { return &doneRec{ch: make(chan struct{})} }

func (d *doneRec) SendDone(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.calls == 1 {
		d.err = err
		close(d.ch)
	}
}

// wait returns the outcome of the send, failing the test if it does not
// come within waitLimit or comes more than once.
func (d *doneRec) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-d.ch:
	case <-time.After(waitLimit):
		t.Fatal("a started send was never told its outcome")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.calls != 1 {
		t.Fatalf("SendDone called %d times", d.calls)
	}
	return d.err
}

// waitAll waits for every started send of dones to succeed.
func waitAll(t *testing.T, dones []*doneRec) {
	t.Helper()
	for _, d := range dones {
		if err := d.wait(t); err != nil {
			t.Fatalf("a started send failed: %v", err)
		}
	}
}

// told reports whether the send was told its outcome.
func (d *doneRec) told() bool {
	select {
	case <-d.ch:
		return true
	default:
		return false
	}
}

// stallFirst makes r's Buffer block at the first message until release
// is closed, after signalling entered; later messages pass.
func stallFirst(r *transporttest.Recorder) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.BufferFor = func(_ int, h transport.Header) []byte {
		once.Do(func() {
			close(entered)
			<-release
		})
		return make([]byte, h.Len)
	}
	return entered, release
}

func start(t *testing.T, tr *Transport, peer int, tag int32, payload []byte) *doneRec {
	t.Helper()
	d := newDone()
	ok, err := tr.StartSend(peer, transport.Header{Comm: 7, Tag: tag, Len: len(payload)}, payload, d)
	if !ok || err != nil {
		t.Fatalf("StartSend to rank %d: %v, %v; want true, nil", peer, ok, err)
	}
	return d
}

// TestStartSendOrder mixes started, blocking and non-blocking sends of
// every size to one peer, with the receiver stalled for a while so that
// the socket fills and frames wait in the queue: all arrive, in order,
// and every started send is told once.
func TestStartSendOrder(t *testing.T) {
	const n = 300
	sizes := []int{12, 1000, trySendMax, trySendMax + 1, 300 << 10, 2 << 20}
	ts, rs := newCluster(t, 2)
	entered, release := stallFirst(rs[1])
	send(t, ts[0], 1, 3, seqPayload(0, 3, 0, 12))
	<-entered
	var dones []*doneRec
	for seq := 1; seq < n; seq++ {
		p := seqPayload(0, 3, seq, sizes[seq%len(sizes)])
		if seq == n/2 {
			close(release) // blocking sends from here on
		}
		switch seq % 3 {
		case 0:
			dones = append(dones, start(t, ts[0], 1, 3, p))
		case 1:
			if ok, err := ts[0].TrySend(1, transport.Header{Comm: 7, Tag: 3, Len: len(p)}, p); err != nil {
				t.Fatal(err)
			} else if !ok {
				dones = append(dones, start(t, ts[0], 1, 3, p))
			}
		case 2:
			if seq > n/2 {
				send(t, ts[0], 1, 3, p)
			} else {
				dones = append(dones, start(t, ts[0], 1, 3, p))
			}
		}
	}
	for seq, m := range rs[1].WaitMsgs(t, n) {
		checkSeqPayload(t, m, 3, seq)
	}
	waitAll(t, dones)
}

// TestStartSendReturnsAtOnce: with the receiver reading nothing, started
// sends of 64 MiB in all return at once, and complete once it reads.
func TestStartSendReturnsAtOnce(t *testing.T) {
	ts, rs := newCluster(t, 2)
	entered, release := stallFirst(rs[1])
	send(t, ts[0], 1, 4, seqPayload(0, 4, 0, 12))
	<-entered
	var dones []*doneRec
	for seq := 1; seq <= 16; seq++ {
		dones = append(dones, start(t, ts[0], 1, 4, seqPayload(0, 4, seq, 4<<20)))
	}
	if dones[len(dones)-1].told() {
		t.Fatal("the last of 64 MiB of started sends completed with the receiver reading nothing")
	}
	close(release)
	waitAll(t, dones)
	for seq, m := range rs[1].WaitMsgs(t, 17) {
		checkSeqPayload(t, m, 4, seq)
	}
}

// TestPollWritesQueue: while a goroutine polls, nobody wakes the writer
// goroutine; queued frames go out through Poll, and EndPoll hands what is
// left back to the writer goroutine.
func TestPollWritesQueue(t *testing.T) {
	ts, rs := newCluster(t, 2)
	entered, release := stallFirst(rs[1])
	send(t, ts[0], 1, 5, seqPayload(0, 5, 0, 12))
	<-entered
	ts[0].BeginPoll()
	var dones []*doneRec
	for seq := 1; seq <= 8; seq++ {
		dones = append(dones, start(t, ts[0], 1, 5, seqPayload(0, 5, seq, 1<<20)))
	}
	close(release)
	pollUntil(t, ts[0], "four started sends", func() bool { return dones[3].told() })
	ts[0].EndPoll()
	waitAll(t, dones)
	for seq, m := range rs[1].WaitMsgs(t, 9) {
		checkSeqPayload(t, m, 5, seq)
	}
}

// TestWithdraw takes back started sends: one still queued whole leaves
// the link up, and the frames around it arrive; one partly written is
// finished from a copy and completes as sent. (It used to drop the link.)
func TestWithdraw(t *testing.T) {
	cause := errors.New("the caller gave up")
	ts, rs := newCluster(t, 2)
	entered, release := stallFirst(rs[1])
	send(t, ts[0], 1, 6, seqPayload(0, 6, 0, 12))
	<-entered
	big := start(t, ts[0], 1, 6, seqPayload(0, 6, 1, 16<<20)) // fills the socket
	whole := start(t, ts[0], 1, 6, seqPayload(0, 6, 99, 1000))
	after := start(t, ts[0], 1, 6, seqPayload(0, 6, 2, 1000))
	if !ts[0].Withdraw(1, whole, cause) {
		t.Fatal("Withdraw of a queued send reported false")
	}
	if err := whole.wait(t); !errors.Is(err, cause) {
		t.Fatalf("withdrawn send told %v, want %v", err, cause)
	}
	if ts[0].Withdraw(1, whole, cause) {
		t.Fatal("a second Withdraw of the same send reported true")
	}
	close(release)
	for _, d := range []*doneRec{big, after} {
		if err := d.wait(t); err != nil {
			t.Fatal(err)
		}
	}
	for seq, m := range rs[1].WaitMsgs(t, 3) {
		checkSeqPayload(t, m, 6, seq)
	}
	if ts[0].Withdraw(1, after, cause) {
		t.Fatal("Withdraw of a send already written reported true")
	}

	// Partly written: finished from a copy, the send completes at once
	// (the receiver is still stalled), the caller's buffer may change,
	// the message arrives as it was, and the link stays up.
	ts, rs = newCluster(t, 2)
	entered, release = stallFirst(rs[1])
	send(t, ts[0], 1, 6, seqPayload(0, 6, 0, 12))
	<-entered
	payload := seqPayload(0, 6, 1, 64<<20)
	half := start(t, ts[0], 1, 6, payload)
	waitHalfWritten(t, ts[0].peers[1])
	if ts[0].Withdraw(1, half, cause) {
		t.Fatal("Withdraw of a half-written send reported true: it cannot be taken back")
	}
	if err := half.wait(t); err != nil {
		t.Fatalf("half-written send withdrawn: %v, want it completed as sent", err)
	}
	clear(payload)
	close(release)
	send(t, ts[0], 1, 6, seqPayload(0, 6, 2, 1000))
	for seq, m := range rs[1].WaitMsgs(t, 3) {
		checkSeqPayload(t, m, 6, seq)
	}
}

// waitHalfWritten waits until the frame at the head of p's queue is partly
// written.
func waitHalfWritten(t *testing.T, p *peer) {
	t.Helper()
	waitFor(t, "part of the frame written", func() bool {
		p.sendMu.Lock() // guards what is written of a frame
		defer p.sendMu.Unlock()
		p.out.mu.Lock()
		defer p.out.mu.Unlock()
		return len(p.out.q) > 0 && p.out.q[0].written > 0
	})
}

// TestStartedSendsFailWithLink: frames queued when the link goes, or the
// transport closes, are told the loss, once, and Close does not wait for
// the peer to read them; also while a goroutine polls, when no writer
// goroutine is there to notice.
func TestStartedSendsFailWithLink(t *testing.T) {
	for _, c := range linkKillers {
		for _, polled := range []bool{false, true} {
			name := c.name
			if polled {
				name += ", polled"
			}
			t.Run(name, func(t *testing.T) { startedSendsFail(t, c.kill, polled) })
		}
	}
}

func startedSendsFail(t *testing.T, kill func(*Transport), polled bool) {
	ts, rs := newCluster(t, 2)
	entered, release := stallFirst(rs[1])
	defer close(release)
	send(t, ts[0], 1, 8, seqPayload(0, 8, 0, 12))
	<-entered
	if polled {
		ts[0].BeginPoll()
		defer ts[0].EndPoll()
	}
	var dones []*doneRec
	for seq := 1; seq <= 8; seq++ {
		dones = append(dones, start(t, ts[0], 1, 8, seqPayload(0, 8, seq, 4<<20)))
	}
	began := time.Now()
	killed := make(chan struct{})
	go func() { // Close may linger, waiting for the stalled peer to close
		kill(ts[0])
		close(killed)
	}()
	defer func() { <-killed }()
	for _, d := range dones[4:] { // the first may have been written
		err := d.wait(t)
		if !errors.Is(err, transport.ErrPeerLost) && !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("queued send after the loss: %v, want ErrPeerLost or ErrClosed", err)
		}
	}
	if d := time.Since(began); d > lingerTimeout/2 {
		t.Errorf("the queued sends failed only after %v", d)
	}
}
