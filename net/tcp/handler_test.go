package tcp

import (
	"bytes"
	"fmt"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// waitLimit bounds every wait in these tests; it is a hang guard, not a
// timing assertion.
const waitLimit = 20 * time.Second

// msg is one delivered message.
type msg struct {
	peer int
	h    transport.Header
	data []byte
}

// recorder is the Handler-side fake: it gives each message a fresh buffer
// (or the one bufferFor returns), records what arrives, and checks the
// Handler calling rules.
type recorder struct {
	bufferFor func(peer int, h transport.Header) []byte // optional

	mu         sync.Mutex // protects following
	msgs       []msg
	lost       map[int]error
	violations []string

	changed chan struct{} // signalled after every event
}

func newRecorder() *recorder {
	return &recorder{lost: map[int]error{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) Buffer(peer int, h transport.Header) []byte {
	r.check(peer, "Buffer")
	if r.bufferFor != nil {
		return r.bufferFor(peer, h)
	}
	return make([]byte, h.Len)
}

func (r *recorder) Deliver(peer int, h transport.Header, payload []byte) {
	r.check(peer, "Deliver")
	r.mu.Lock()
	r.msgs = append(r.msgs, msg{peer, h, payload})
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) Lost(peer int, err error) {
	r.mu.Lock()
	if _, dup := r.lost[peer]; dup {
		r.violations = append(r.violations, fmt.Sprintf("Lost(%d) twice: %v", peer, err))
	}
	r.lost[peer] = err
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) check(peer int, call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, gone := r.lost[peer]; gone {
		r.violations = append(r.violations, fmt.Sprintf("%s(%d) after Lost", call, peer))
	}
}

func (r *recorder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// wait blocks until cond, called under r.mu, holds.
func (r *recorder) wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	r.waitWithin(t, waitLimit, what, cond)
}

// waitWithin is wait with a limit of its own.
func (r *recorder) waitWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	limit := time.NewTimer(d)
	defer limit.Stop()
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-limit.C:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// waitMsgs waits until n messages have arrived and returns them.
func (r *recorder) waitMsgs(t testing.TB, n int) []msg {
	t.Helper()
	r.wait(t, fmt.Sprintf("%d messages", n), func() bool { return len(r.msgs) >= n })
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]msg(nil), r.msgs...)
}

// waitLost waits until peer is reported lost and returns the error.
func (r *recorder) waitLost(t testing.TB, peer int) error {
	t.Helper()
	r.wait(t, fmt.Sprintf("Lost(%d)", peer), func() bool { _, ok := r.lost[peer]; return ok })
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost[peer]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func (r *recorder) checkRules(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		t.Errorf("handler rule broken: %s", v)
	}
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// newCluster starts n transports on loopback, each with a recorder, and
// closes them when the test ends.
func newCluster(t testing.TB, n int, opts ...Option) ([]*Transport, []*recorder) {
	t.Helper()
	rs := make([]*recorder, n)
	hs := make([]transport.Handler, n)
	for i := range rs {
		rs[i] = newRecorder()
		hs[i] = rs[i]
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.checkRules(t)
		}
	})
	return startCluster(t, hs, opts...), rs
}

// startCluster starts one transport per handler on loopback and closes
// them when the test ends.
func startCluster(t testing.TB, hs []transport.Handler, opts ...Option) []*Transport {
	t.Helper()
	lns := make([]*Listener, len(hs))
	addrs := make([]string, len(hs))
	for i := range lns {
		l, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i], addrs[i] = l, l.Addr()
	}
	ts := make([]*Transport, len(hs))
	for i := range ts {
		ts[i] = New(lns[i], i, addrs, testSecret, opts...)
	}
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	for i, tr := range ts {
		if err := tr.Start(hs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// logBuffer is a log destination that tests can read while goroutines log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *log.Logger { return log.New(b, "", 0) }
