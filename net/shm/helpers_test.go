package shm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// waitLimit bounds every wait in these tests; it is a hang guard, not a
// timing assertion.
const waitLimit = 20 * time.Second

// newJobID returns a fresh job id, so that tests never share files.
func newJobID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "test" + hex.EncodeToString(b)
}

func newSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

// jobFiles lists the files of job under Dir.
func jobFiles(tb testing.TB, jobID string) []string {
	tb.Helper()
	m, err := filepath.Glob(Dir + "/gorun-" + jobID + "-*")
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// cluster is the transports of the ranks of one test job, all on one host.
type cluster struct {
	job    string
	secret []byte
	ts     []*Transport
	rs     []*recorder
}

// newCluster builds and starts n ranks; the test's cleanup closes them and
// checks that none of the job's files remain.
func newCluster(tb testing.TB, n int, opts ...Option) *cluster {
	tb.Helper()
	c := build(tb, n, opts...)
	for i := range c.ts {
		c.start(tb, i)
	}
	return c
}

// build creates the transports of n ranks without starting them.
func build(tb testing.TB, n int, opts ...Option) *cluster {
	tb.Helper()
	c := &cluster{job: newJobID(), secret: newSecret()}
	local := make([]int, n)
	for i := range local {
		local[i] = i
	}
	for i := range n {
		tr, err := New(c.job, i, local, n, c.secret, opts...)
		if err != nil {
			tb.Fatalf("rank %d: %v", i, err)
		}
		c.ts = append(c.ts, tr)
		c.rs = append(c.rs, newRecorder())
	}
	tb.Cleanup(func() {
		for _, tr := range c.ts {
			tr.Close()
		}
		if err := Cleanup(c.job); err != nil {
			tb.Errorf("Cleanup: %v", err)
		}
		if left := jobFiles(tb, c.job); len(left) > 0 {
			tb.Errorf("files left after Close and Cleanup: %v", left)
		}
	})
	return c
}

func (c *cluster) start(tb testing.TB, i int) {
	tb.Helper()
	if err := c.ts[i].Start(c.rs[i]); err != nil {
		tb.Fatalf("rank %d: Start: %v", i, err)
	}
}

// abandon stops t's goroutines without closing anything, as a killed
// process would, and leaves its file behind.
func (t *Transport) abandon() {
	t.closeOnce.Do(func() {
		t.closing.Store(true)
		t.cancel()
		t.seg.alarm()
		t.wg.Wait()
	})
}

// fakeDead makes t believe that the process of peer has exited.
func (t *Transport) fakeDead(tb testing.TB, peer int) {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		tb.Fatal(err)
	}
	max, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	p := t.peers[peer]
	p.procMu.Lock()
	p.proc.close()
	p.proc = process{pid: max + 1, fd: -1} // no process can have it
	p.procMu.Unlock()
}

// recorder is the Handler-side fake: it gives each message a fresh buffer
// (or what bufferFor returns), records what arrives, and checks the
// Handler's calling rules.
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
		r.violations = append(r.violations, "Lost twice for rank "+strconv.Itoa(peer))
	}
	r.lost[peer] = err
	r.mu.Unlock()
	r.signal()
}

func (r *recorder) check(peer int, call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, gone := r.lost[peer]; gone {
		r.violations = append(r.violations, call+" after Lost for rank "+strconv.Itoa(peer))
	}
}

func (r *recorder) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond, evaluated under r.mu, holds.
func (r *recorder) waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.After(waitLimit)
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
		case <-deadline:
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitMsgs waits for n messages and returns them.
func (r *recorder) waitMsgs(tb testing.TB, n int) []msg {
	tb.Helper()
	var got []msg
	r.waitFor(tb, strconv.Itoa(n)+" messages", func() bool { got = r.msgs; return len(r.msgs) >= n })
	return got
}

// waitLost waits for the loss of peer and returns its error.
func (r *recorder) waitLost(tb testing.TB, peer int) error {
	tb.Helper()
	var err error
	r.waitFor(tb, "Lost("+strconv.Itoa(peer)+")", func() bool { err = r.lost[peer]; return err != nil })
	return err
}

func checkLost(tb testing.TB, err error, rank int, cause error) {
	tb.Helper()
	var pe *transport.PeerError
	if !errors.Is(err, transport.ErrPeerLost) || !errors.As(err, &pe) || pe.Rank != rank {
		tb.Fatalf("loss error %v: want a PeerError for rank %d wrapping ErrPeerLost", err, rank)
	}
	if cause != nil && !errors.Is(err, cause) {
		tb.Fatalf("loss error %v: want it to wrap %v", err, cause)
	}
}
