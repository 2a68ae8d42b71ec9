// Package spmdtest runs the ranks of a test job as goroutines of one test
// over the in-process transport (net/mem), the way raft has rafttest.
package spmdtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/net/mem"
	"github.com/gorun-hpc/gorun/spmd"
)

// Timeout bounds one Run; a test that deadlocks fails instead of hanging.
const Timeout = 60 * time.Second

// Worlds builds the worlds of n ranks over one mem network. The caller
// closes them.
func Worlds(tb testing.TB, n int) ([]*spmd.World, *mem.Network) {
	tb.Helper()
	nw := mem.NewNetwork(n)
	peers := make([]spmd.Peer, n)
	for i := range peers {
		peers[i] = spmd.Peer{Rank: i, HostID: "mem", Hostname: "mem", Addr: fmt.Sprintf("mem:%d", i)}
	}
	ws := make([]*spmd.World, n)
	for i := range ws {
		w, err := spmd.New(nw.Transport(i), i, peers)
		if err != nil {
			tb.Fatalf("rank %d: %v", i, err)
		}
		ws[i] = w
	}
	return ws, nw
}

// Run runs f as every rank of an n-rank job and fails tb with the errors of
// the ranks that returned one, each naming its rank.
func Run(tb testing.TB, n int, f func(ctx context.Context, w *spmd.World) error) {
	tb.Helper()
	ws, _ := Worlds(tb, n)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range ws {
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
	for _, w := range ws {
		w.Close()
	}
	for i, err := range errs {
		if err != nil {
			tb.Errorf("rank %d of %d: %v", i, n, err)
		}
	}
}
