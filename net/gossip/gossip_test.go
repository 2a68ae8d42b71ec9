package gossip

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// testConfig is a job's configuration with a fresh job id.
func testConfig(t testing.TB) Config {
	return Config{JobID: "job-" + t.Name(), Secret: []byte("s3cret of " + t.Name())}
}

func openSeed(t testing.TB, cfg Config) *Seed {
	t.Helper()
	s, err := OpenSeed(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func member(rank int) Member {
	return Member{Rank: rank, HostID: "host-a", Hostname: "a", Addr: fmt.Sprintf("127.0.0.1:%d", 20000+rank), Pid: 1000 + rank}
}

type joined struct {
	node    *Node
	members []Member
	err     error
}

// joinRanks joins ranks concurrently and returns their results by index.
// Nodes are closed at the end of the test.
func joinRanks(t testing.TB, ctx context.Context, cfg func(rank int) Config, ranks []int, size int) []joined {
	t.Helper()
	res := make([]joined, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, ms, err := Join(ctx, cfg(r), member(r), size)
			res[i] = joined{n, ms, err}
		}()
	}
	wg.Wait()
	for _, j := range res {
		if j.node != nil {
			t.Cleanup(func() { j.node.Close() })
		}
	}
	return res
}

func seq(from, to int) []int {
	var rs []int
	for r := from; r < to; r++ {
		rs = append(rs, r)
	}
	return rs
}

func wantTable(t *testing.T, who string, got []Member, size int) {
	t.Helper()
	var want []Member
	for r := range size {
		want = append(want, member(r))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s sees %v, want %v", who, got, want)
	}
}

func TestConverge(t *testing.T) {
	const size = 8
	cfg := testConfig(t)
	seed := openSeed(t, cfg)
	cfg.Seeds = []string{seed.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := joinRanks(t, ctx, func(int) Config { return cfg }, seq(0, size), size)
	for r, j := range res {
		if j.err != nil {
			t.Fatalf("rank %d: %v", r, j.err)
		}
		wantTable(t, fmt.Sprintf("rank %d", r), j.members, size)
	}
	ms, err := seed.Wait(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	wantTable(t, "seed", ms, size)
}

func TestSeveralSeeds(t *testing.T) {
	const size = 6
	cfg := testConfig(t)
	a := openSeed(t, cfg)
	cfgB := cfg
	cfgB.Seeds = []string{a.Addr()}
	b := openSeed(t, cfgB)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := joinRanks(t, ctx, func(r int) Config {
		c := cfg
		if c.Seeds = []string{a.Addr()}; r%2 == 1 {
			c.Seeds = []string{"127.0.0.1:1", b.Addr()} // the first is never up
		}
		return c
	}, seq(0, size), size)
	for r, j := range res {
		if j.err != nil {
			t.Fatalf("rank %d: %v", r, j.err)
		}
		wantTable(t, fmt.Sprintf("rank %d", r), j.members, size)
	}
}

// TestSeedGone: half the ranks join the seed, the seed closes, and the
// other half join through a rank; everyone converges without the seed.
func TestSeedGone(t *testing.T) {
	const size = 6
	cfg := testConfig(t)
	seed := openSeed(t, cfg)
	cfg.Seeds = []string{seed.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	rank0 := make(chan string, 1)
	var wg sync.WaitGroup
	first := make([]joined, size/2)
	for r := range size / 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hook := func(c *core) {
				if r == 0 {
					rank0 <- c.addr()
				}
			}
			n, ms, err := join(ctx, cfg, member(r), size, hook)
			first[r] = joined{n, ms, err}
		}()
	}
	if _, err := seed.Wait(ctx, size/2); err != nil {
		t.Fatal(err)
	}
	seed.Close()
	late := cfg
	late.Seeds = []string{seed.Addr(), <-rank0}
	second := joinRanks(t, ctx, func(int) Config { return late }, seq(size/2, size), size)
	wg.Wait()
	for _, j := range append(first, second...) {
		if j.node != nil {
			t.Cleanup(func() { j.node.Close() })
		}
		if j.err != nil {
			t.Fatal(j.err)
		}
		wantTable(t, "rank", j.members, size)
	}
}

func TestMissingRank(t *testing.T) {
	const size = 5
	cfg := testConfig(t)
	seed := openSeed(t, cfg)
	cfg.Seeds = []string{seed.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var werr error
	waited := make(chan struct{})
	go func() { _, werr = seed.Wait(ctx, size); close(waited) }()
	res := joinRanks(t, ctx, func(int) Config { return cfg }, []int{0, 1, 2, 4}, size)
	<-waited
	for _, err := range []error{res[0].err, res[1].err, res[2].err, res[3].err, werr} {
		var me *MissingError
		if !errors.Is(err, ErrTimeout) || !errors.As(err, &me) {
			t.Fatalf("got %v, want a MissingError", err)
		}
		if !reflect.DeepEqual(me.Missing, []int{3}) || errors.Is(err, ErrNoSeed) ||
			!strings.Contains(err.Error(), "rank 3 of 5 never arrived within ") {
			t.Errorf("got %v (missing %v), want rank 3 named", err, me.Missing)
		}
	}
}

// TestRefused: a node with another secret or another job id cannot join.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alter func(*Config)
	}{
		{"wrong secret", func(c *Config) { c.Secret = []byte("not the secret") }},
		{"other job", func(c *Config) { c.JobID = "another-job" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			seed := openSeed(t, cfg)
			cfg.Seeds = []string{seed.Addr()}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			res := joinRanks(t, ctx, func(r int) Config {
				c := cfg
				if r == 1 {
					tc.alter(&c)
				}
				return c
			}, []int{0, 1}, 2)
			if err := res[1].err; !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrNoSeed) {
				t.Errorf("stranger: got %v, want ErrNoSeed", err)
			}
			var me *MissingError
			if !errors.As(res[0].err, &me) || !reflect.DeepEqual(me.Missing, []int{1}) {
				t.Errorf("rank 0: got %v, want rank 1 missing", res[0].err)
			}
		})
	}
}

func TestDuplicateRank(t *testing.T) {
	cfg := testConfig(t)
	seed := openSeed(t, cfg)
	cfg.Seeds = []string{seed.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, j := range joinRanks(t, ctx, func(int) Config { return cfg }, []int{0, 1}, 2) {
		if j.err != nil {
			t.Fatal(j.err)
		}
	}
	dup := joinRanks(t, ctx, func(int) Config { return cfg }, []int{1}, 2)[0]
	if !errors.Is(dup.err, ErrDuplicateRank) {
		t.Errorf("second rank 1: got %v, want ErrDuplicateRank", dup.err)
	}
	// The duplicate learns of the conflict from the seed's half of the
	// push/pull, possibly before the seed has merged the duplicate's half:
	// the seed reports it a moment later.
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err = seed.Wait(ctx, 2); errors.Is(err, ErrDuplicateRank) {
			break
		}
	}
	if !errors.Is(err, ErrDuplicateRank) {
		t.Errorf("seed: got %v, want ErrDuplicateRank within 5s", err)
	}
	if ms := seed.Members(); len(ms) != 2 || ms[1].Pid != member(1).Pid {
		t.Errorf("seed lost the genuine rank 1: %v", ms)
	}
}

func TestConfigErrors(t *testing.T) {
	good := testConfig(t)
	for _, tc := range []struct {
		name       string
		cfg        func(Config) Config
		rank, size int
	}{
		{"no job id", func(c Config) Config { c.JobID = ""; return c }, 0, 1},
		{"no secret", func(c Config) Config { c.Secret = nil; return c }, 0, 1},
		{"bad bind address", func(c Config) Config { c.BindAddr = "localhost"; return c }, 0, 1},
		{"rank out of range", func(c Config) Config { return c }, 2, 2},
		{"size zero", func(c Config) Config { return c }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Join(context.Background(), tc.cfg(good), member(tc.rank), tc.size)
			if !errors.Is(err, ErrConfig) {
				t.Errorf("got %v, want ErrConfig", err)
			}
		})
	}
}
