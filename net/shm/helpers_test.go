package shm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
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
	rs     []*transporttest.Recorder
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
		c.rs = append(c.rs, transporttest.NewRecorder())
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
