package gossip

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

type loss struct {
	by, rank int
	reason   string
}

// lossJob starts a seed and size ranks whose OnLost reports to the returned
// channel.
func lossJob(t *testing.T, size int) ([]*Node, chan loss) {
	t.Helper()
	cfg := testConfig(t)
	seed := openSeed(t, cfg)
	cfg.Seeds = []string{seed.Addr()}
	losses := make(chan loss, 4*size)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := joinRanks(t, ctx, func(r int) Config {
		c := cfg
		c.OnLost = func(rank int, reason string) { losses <- loss{r, rank, reason} }
		return c
	}, seq(0, size), size)
	nodes := make([]*Node, size)
	for r, j := range res {
		if j.err != nil {
			t.Fatal(j.err)
		}
		nodes[r] = j.node
	}
	return nodes, losses
}

// expectLoss waits until every rank but gone has reported gone lost with a
// reason starting with want.
func expectLoss(t *testing.T, losses chan loss, size, gone int, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	seen := map[int]bool{}
	for len(seen) < size-1 {
		select {
		case l := <-losses:
			if l.rank != gone || !strings.HasPrefix(l.reason, want) {
				t.Errorf("rank %d reports rank %d lost: %q; want rank %d %s", l.by, l.rank, l.reason, gone, want)
			}
			if seen[l.by] {
				t.Errorf("rank %d reports rank %d twice", l.by, l.rank)
			}
			seen[l.by] = true
		case <-timeout:
			t.Fatalf("only %v reported rank %d lost", seen, gone)
		}
	}
}

// TestLostFailed: a node that stops without leaving is reported failed.
func TestLostFailed(t *testing.T) {
	const size = 4
	nodes, losses := lossJob(t, size)
	start := time.Now()
	nodes[3].c.close(false) // sockets gone, no leave
	expectLoss(t, losses, size, 3, "failed")
	t.Logf("failure reported everywhere after %v", time.Since(start))
	if ms := nodes[0].Members(); len(ms) != size-1 {
		t.Errorf("rank 0 still sees %v", ms)
	}
}

// TestLostLeft: Close is reported as a graceful leave.
func TestLostLeft(t *testing.T) {
	const size = 4
	nodes, losses := lossJob(t, size)
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	expectLoss(t, losses, size, 2, "left")
}

// TestCloseInOnLost: OnLost may close its own node without deadlock.
func TestCloseInOnLost(t *testing.T) {
	const size = 3
	cfg := testConfig(t)
	seed := openSeed(t, cfg)
	cfg.Seeds = []string{seed.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	nodes := make(map[int]*Node)
	closed := make(chan int, size)
	res := joinRanks(t, ctx, func(r int) Config {
		c := cfg
		c.OnLost = func(int, string) {
			mu.Lock()
			n := nodes[r]
			mu.Unlock()
			n.Close()
			closed <- r
		}
		return c
	}, seq(0, size), size)
	mu.Lock()
	for r, j := range res {
		if j.err != nil {
			t.Fatal(j.err)
		}
		nodes[r] = j.node
	}
	mu.Unlock()
	nodes[0].Close()
	for range size - 1 {
		select {
		case <-closed:
		case <-ctx.Done():
			t.Fatal("OnLost did not return")
		}
	}
}

func ExampleJoin() {
	cfg := Config{JobID: "example", Secret: []byte("per-job secret")}
	seed, err := OpenSeed(cfg)
	if err != nil {
		panic(err)
	}
	defer seed.Close()
	cfg.Seeds = []string{seed.Addr()}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for rank := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			self := Member{Rank: rank, HostID: "h", Addr: fmt.Sprintf("127.0.0.1:%d", 9000+rank)}
			node, table, err := Join(ctx, cfg, self, 2)
			if err != nil {
				panic(err)
			}
			defer node.Close()
			if rank == 0 {
				for _, m := range table {
					fmt.Println(m.Rank, m.Addr)
				}
			}
		}()
	}
	wg.Wait()
	// Output:
	// 0 127.0.0.1:9000
	// 1 127.0.0.1:9001
}

// TestCloseStopsGoroutines: after Close of every node, the goroutines of
// the job (ours and memberlist's) are gone.
func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	cfg := testConfig(t)
	seed, err := OpenSeed(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Seeds = []string{seed.Addr()}
	cfg.OnLost = func(int, string) {}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _, err := Join(ctx, cfg, member(r), 3)
			if err != nil {
				t.Error(err)
				return
			}
			n.Close()
		}()
	}
	wg.Wait()
	seed.Close()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
