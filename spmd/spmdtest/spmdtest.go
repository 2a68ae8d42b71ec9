// Package spmdtest runs the ranks of a test job as goroutines of one test,
// over the in-process transport (net/mem) or over real loopback TCP
// connections (net/tcp), the way raft has rafttest.
package spmdtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/net/mem"
	"github.com/gorun-hpc/gorun/net/tcp"
	"github.com/gorun-hpc/gorun/spmd"
)

// Timeout bounds one Run; a test that deadlocks fails instead of hanging.
const Timeout = 60 * time.Second

// Kind names a transport a test job runs over.
type Kind string

// The transports a test job can run over.
const (
	Mem Kind = "mem"
	TCP Kind = "tcp"
)

// Kinds lists every transport, for tests that run over each.
var Kinds = []Kind{Mem, TCP}

// Job is the worlds of one test job and the means to kill a rank of it.
type Job struct {
	Worlds []*spmd.World
	// Kill makes a rank vanish as a crashed process would: its peers see it
	// lost, through the transport's own means.
	Kill func(rank int)
}

// Close closes every world.
func (j *Job) Close() {
	for _, w := range j.Worlds {
		w.Close()
	}
}

// Worlds builds the worlds of n ranks over one mem network. The caller
// closes them.
func Worlds(tb testing.TB, n int) ([]*spmd.World, *mem.Network) {
	tb.Helper()
	nw := mem.NewNetwork(n)
	ws := make([]*spmd.World, n)
	for i := range ws {
		w, err := spmd.New(nw.Transport(i), i, Peers(n, "mem"))
		if err != nil {
			tb.Fatalf("rank %d: %v", i, err)
		}
		ws[i] = w
	}
	return ws, nw
}

// Peers describes n ranks that all run on host.
func Peers(n int, host string) []spmd.Peer {
	peers := make([]spmd.Peer, n)
	for i := range peers {
		peers[i] = spmd.Peer{Rank: i, HostID: host, Hostname: host, Addr: fmt.Sprintf("%s:%d", host, i)}
	}
	return peers
}

// NewJob builds an n-rank job over the transport kind.
func NewJob(tb testing.TB, kind Kind, n int) *Job {
	tb.Helper()
	switch kind {
	case Mem:
		ws, nw := Worlds(tb, n)
		return &Job{Worlds: ws, Kill: nw.Kill}
	case TCP:
		return tcpJob(tb, n)
	}
	tb.Fatalf("spmdtest: unknown transport %q", kind)
	return nil
}

// tcpJob builds n worlds joined by real loopback TCP connections with a
// fresh secret. Killing a rank closes its transport, which its peers see as
// a closed connection, as they would a dead process's.
func tcpJob(tb testing.TB, n int) *Job {
	secret := make([]byte, 32)
	rand.Read(secret)
	ls := make([]*tcp.Listener, n)
	peers := Peers(n, "loopback")
	addrs := make([]string, n)
	for i := range ls {
		l, err := tcp.Listen("127.0.0.1:0")
		if err != nil {
			tb.Fatalf("listen: %v", err)
		}
		ls[i], addrs[i] = l, l.Addr()
		peers[i].Addr = l.Addr()
	}
	j := &Job{Worlds: make([]*spmd.World, n)}
	trs := make([]*tcp.Transport, n)
	for i := range ls {
		trs[i] = tcp.New(ls[i], i, addrs, secret)
		w, err := spmd.New(trs[i], i, peers)
		if err != nil {
			tb.Fatalf("rank %d: %v", i, err)
		}
		j.Worlds[i] = w
	}
	j.Kill = func(r int) { trs[r].Close() }
	return j
}

// Run runs f as every rank of an n-rank job over net/mem and fails tb with
// the errors of the ranks that returned one, each naming its rank.
func Run(tb testing.TB, n int, f func(ctx context.Context, w *spmd.World) error) {
	tb.Helper()
	RunOn(tb, Mem, n, f)
}

// RunOn is Run over the transport kind.
func RunOn(tb testing.TB, kind Kind, n int, f func(ctx context.Context, w *spmd.World) error) {
	tb.Helper()
	j := NewJob(tb, kind, n)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range j.Worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(ctx, w)
			if errs[i] != nil {
				w.Close() // so that ranks waiting on it fail instead of hanging
			}
		}()
	}
	wg.Wait()
	j.Close()
	for i, err := range errs {
		if err != nil {
			tb.Errorf("rank %d of %d over %s: %v", i, n, kind, err)
		}
	}
}
