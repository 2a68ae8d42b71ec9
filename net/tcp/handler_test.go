package tcp

import (
	"bytes"
	"log"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/spmd/transport/transporttest"
)

// waitLimit bounds every wait in these tests; it is a hang guard, not a
// timing assertion.
const waitLimit = 20 * time.Second

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// newCluster starts n transports on loopback, each with a Recorder, and
// closes them when the test ends.
func newCluster(t testing.TB, n int, opts ...Option) ([]*Transport, []*transporttest.Recorder) {
	t.Helper()
	rs := make([]*transporttest.Recorder, n)
	hs := make([]transport.Handler, n)
	for i := range rs {
		rs[i] = transporttest.NewRecorder()
		hs[i] = rs[i]
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.CheckRules(t)
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
