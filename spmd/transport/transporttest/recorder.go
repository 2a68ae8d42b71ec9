package transporttest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// WaitLimit bounds every wait of a Recorder; it is a hang guard, not a
// timing assertion.
const WaitLimit = 20 * time.Second

// Msg is one delivered message.
type Msg struct {
	Peer   int
	Header transport.Header
	Data   []byte
}

// Recorder is the Handler-side fake: it gives each message a fresh buffer
// (or the one BufferFor returns), records what arrives, and checks the
// Handler's calling rules: no Buffer or Deliver for a rank after its Lost,
// and at most one Lost per rank.
//
// A Recorder is safe for concurrent use; set BufferFor before the
// transport starts.
type Recorder struct {
	// BufferFor, if set, supplies the buffer for each message instead of
	// a fresh one.
	BufferFor func(peer int, h transport.Header) []byte

	mu         sync.Mutex // protects following
	msgs       []Msg
	lost       map[int]error
	violations []string

	changed chan struct{} // signalled after every event
}

var _ transport.Handler = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{lost: map[int]error{}, changed: make(chan struct{}, 1)}
}

// Buffer implements transport.Handler.
func (r *Recorder) Buffer(peer int, h transport.Header) []byte {
	r.check(peer, "Buffer")
	if r.BufferFor != nil {
		return r.BufferFor(peer, h)
	}
	return make([]byte, h.Len)
}

// Deliver implements transport.Handler.
func (r *Recorder) Deliver(peer int, h transport.Header, payload []byte) {
	r.check(peer, "Deliver")
	r.mu.Lock()
	r.msgs = append(r.msgs, Msg{peer, h, payload})
	r.mu.Unlock()
	r.signal()
}

// Lost implements transport.Handler.
func (r *Recorder) Lost(peer int, err error) {
	r.mu.Lock()
	if _, dup := r.lost[peer]; dup {
		r.violations = append(r.violations, fmt.Sprintf("Lost(%d) twice: %v", peer, err))
	}
	r.lost[peer] = err
	r.mu.Unlock()
	r.signal()
}

func (r *Recorder) check(peer int, call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, gone := r.lost[peer]; gone {
		r.violations = append(r.violations, fmt.Sprintf("%s(%d) after Lost", call, peer))
	}
}

func (r *Recorder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// wait blocks, for at most d, until cond, called under r.mu, holds. It
// fails the test at once if the Handler rules have been broken.
func (r *Recorder) wait(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	limit := time.NewTimer(d)
	defer limit.Stop()
	for {
		r.mu.Lock()
		ok := cond()
		bad := r.violations
		r.mu.Unlock()
		if len(bad) > 0 {
			tb.Fatalf("handler rules broken: %v", bad)
		}
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-limit.C:
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// WaitMsgs waits until at least n messages have arrived and returns all of
// them, in the order of delivery.
func (r *Recorder) WaitMsgs(tb testing.TB, n int) []Msg {
	tb.Helper()
	r.wait(tb, WaitLimit, fmt.Sprintf("%d messages", n), func() bool { return len(r.msgs) >= n })
	return r.Msgs()
}

// WaitLost waits until peer is reported lost and returns the error.
func (r *Recorder) WaitLost(tb testing.TB, peer int) error {
	tb.Helper()
	return r.WaitLostWithin(tb, WaitLimit, peer)
}

// WaitLostWithin is WaitLost with a limit of its own.
func (r *Recorder) WaitLostWithin(tb testing.TB, d time.Duration, peer int) error {
	tb.Helper()
	var err error
	r.wait(tb, d, fmt.Sprintf("Lost(%d)", peer), func() bool {
		var ok bool
		err, ok = r.lost[peer]
		return ok
	})
	return err
}

// Msgs returns a copy of the messages delivered so far.
func (r *Recorder) Msgs() []Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Msg(nil), r.msgs...)
}

// Count returns how many messages have been delivered so far.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// Losses returns a copy of the losses reported so far, by rank.
func (r *Recorder) Losses() map[int]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[int]error, len(r.lost))
	for p, err := range r.lost {
		m[p] = err
	}
	return m
}

// CheckRules reports, as test errors, every break of the Handler's calling
// rules seen so far.
func (r *Recorder) CheckRules(tb testing.TB) {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range r.violations {
		tb.Errorf("handler rule broken: %s", v)
	}
}
