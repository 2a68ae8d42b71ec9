package gossip

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkJoin8 measures launch-to-ready of a job of 8 ranks on loopback:
// from opening the seed until every rank's Join has returned the full table.
// Closing is not timed.
func BenchmarkJoin8(b *testing.B) {
	const size = 8
	for b.Loop() {
		cfg := testConfig(b)
		seed, err := OpenSeed(cfg)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Seeds = []string{seed.Addr()}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		nodes := make([]*Node, size)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for r := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nodes[r], _, errs[r] = Join(ctx, cfg, member(r), size)
			}()
		}
		wg.Wait()
		cancel()
		b.StopTimer()
		for r := range size {
			if errs[r] != nil {
				b.Fatal(errs[r])
			}
		}
		var cw sync.WaitGroup
		for _, n := range nodes {
			cw.Add(1)
			go func() { defer cw.Done(); n.Close() }()
		}
		cw.Wait()
		seed.Close()
		b.StartTimer()
	}
}

// BenchmarkDetectFailure measures how long a job of 4 ranks takes to report,
// on every other rank, a rank that died without leaving.
func BenchmarkDetectFailure(b *testing.B) {
	const size = 4
	for b.Loop() {
		b.StopTimer()
		cfg := testConfig(b)
		seed, err := OpenSeed(cfg)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Seeds = []string{seed.Addr()}
		lost := make(chan int, size)
		cfg.OnLost = func(rank int, _ string) { lost <- rank }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		nodes := make([]*Node, size)
		var wg sync.WaitGroup
		for r := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if nodes[r], _, err = Join(ctx, cfg, member(r), size); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		cancel()
		b.StartTimer()
		nodes[size-1].c.close(false)
		for range size - 1 {
			<-lost
		}
		b.StopTimer()
		for _, n := range nodes[:size-1] {
			n.Close()
		}
		seed.Close()
		b.StartTimer()
	}
}
