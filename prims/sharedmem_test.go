package prims_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/net/shm"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/topo"
)

// sharedRan runs collectives on c, whose ranks are on one host and reach
// each other through memory they share, and says what shows that the
// Shared algorithms did not run in that memory: topo not counting them as
// candidates (Layout.Shared), or Choose not choosing them for a barrier and an
// 8-byte all-reduce on a host with a core for every rank, where one wait
// in memory beats any message; a call that Choose chose them for or that
// forced them, of every collective they implement, that ran no round in
// that memory (prims.SharedRounds) or got a wrong result; or
// prims.SharedMemory's word that c's memory is not in use.
func sharedRan(ctx context.Context, c *spmd.Comm) error {
	if !topo.LayoutOf(c).Shared {
		return fmt.Errorf("topo sees no shared memory among %d ranks on one host: %w", c.Size(), unshared(c))
	}
	var cks []check
	for _, k := range []check{{topo.Barrier, "", 0, false}, {topo.AllReduce, "", 2, true}} { // 8 bytes
		a, err := prims.Choose(ctx, c, k.coll, 4*k.n)
		if err != nil {
			return err
		}
		switch {
		case a == topo.Shared:
			cks = append(cks, k)
		case c.Size() <= runtime.NumCPU():
			return fmt.Errorf("Choose chose %s for an 8-byte %s on one host, not %s", a, k.coll, topo.Shared)
		}
	}
	for _, coll := range topo.Collectives {
		if prims.Applies(coll, topo.Shared) {
			cks = append(cks, check{coll, topo.Shared, 1000, false})
		}
	}
	for _, k := range cks {
		before := prims.SharedRounds(c)
		if err := run[float32](ctx, c, k); err != nil {
			return err
		}
		if prims.SharedRounds(c) == before {
			return fmt.Errorf("%v ran no round in shared memory: %w", k, unshared(c))
		}
	}
	return prims.SharedMemory(c)
}

// unshared is why c's shared memory is not in use, or an error that says
// that prims.SharedMemory knows no reason.
func unshared(c *spmd.Comm) error {
	if err := prims.SharedMemory(c); err != nil {
		return err
	}
	return errors.New("yet prims.SharedMemory says it is in use")
}

// TestSharedMemoryUsed: on one host, over shared memory, the Shared
// algorithms are chosen where they are cheapest and run in the memory the
// ranks share, chosen or forced, and prims.SharedMemory says so.
// TestSharedMemoryLost shows that each of these checks fails when the
// shared memory's setup does.
func TestSharedMemoryUsed(t *testing.T) {
	for _, kind := range []spmdtest.Kind{spmdtest.SHM, spmdtest.Mem} {
		for _, p := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/p=%d", kind, p), func(t *testing.T) {
				spmdtest.RunOn(t, kind, p, func(ctx context.Context, w *spmd.World) error {
					return sharedRan(ctx, w.Comm)
				})
			})
		}
	}
}

// TestSharedCandidate: Choose picks the Shared algorithms for a barrier
// and an 8-byte all-reduce where the ranks share memory and every rank has
// a core, where one wait in memory beats any message, and never where they
// do not share it: joined by TCP, or on two hosts (topo.TestLayoutShared
// checks that topo says which).
func TestSharedCandidate(t *testing.T) {
	tests := []struct {
		kind   spmdtest.Kind
		p      int
		shared bool
	}{
		{spmdtest.SHM, 2, true},
		{spmdtest.Mem, 2, true},
		{spmdtest.SHM, 3, true},
		{spmdtest.TCP, 2, false},
		{spmdtest.Mixed, 4, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/p=%d", tt.kind, tt.p), func(t *testing.T) {
			spmdtest.RunOn(t, tt.kind, tt.p, func(ctx context.Context, w *spmd.World) error {
				for _, coll := range []topo.Collective{topo.Barrier, topo.AllReduce} {
					a, err := prims.Choose(ctx, w.Comm, coll, 8)
					if err != nil {
						return err
					}
					if a == topo.Shared && !tt.shared || a != topo.Shared && tt.shared && tt.p <= runtime.NumCPU() {
						return fmt.Errorf("Choose(%s, 8 B) = %s, with Layout.Shared %v", coll, a, topo.LayoutOf(w.Comm).Shared)
					}
				}
				return nil
			})
		})
	}
}

// errInjected is the failure the tests plant in the shared memory's setup.
var errInjected = errors.New("injected: no shared memory for you")

// TestSharedMemoryLost runs sharedRan, as TestSharedMemoryUsed does, on
// jobs of one host over shared memory whose shared memory for collectives
// fails to set up: it must fail on every rank and say why, not pass on
// message algorithms that run in its place.
func TestSharedMemoryLost(t *testing.T) {
	const p = 3
	tests := []struct {
		name string
		// wrap returns the transport of a rank, given its shared-memory one.
		wrap func(t transport.Transport) transport.Transport
		// before runs on every rank before sharedRan.
		before func(c *spmd.Comm)
		// why is what every rank's error wraps; a failure that breaks
		// the communicator says so on one rank at least, the others
		// learning only that a rank gave up.
		why  error
		some bool
		say  string
	}{{
		name: "transport maps none",
		wrap: func(t transport.Transport) transport.Transport { return opaque{t} },
		why:  spmd.ErrNotShared,
		say:  "topo sees no shared memory",
	}, {
		name: "mapping fails",
		wrap: func(t transport.Transport) transport.Transport { return unmappable{opaque{t}, t.(transport.Sharer)} },
		why:  errInjected,
		some: true,
		say:  "mapping the memory of the Shared algorithms",
	}, {
		name:   "failure unseen",
		before: func(c *spmd.Comm) { prims.LoseSharedMemory(c, errInjected) },
		why:    errInjected,
		say:    "ran no round in shared memory",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := runOnSHM(t, p, tt.wrap, nil, func(ctx context.Context, w *spmd.World) error {
				if tt.before != nil {
					tt.before(w.Comm)
				}
				return sharedRan(ctx, w.Comm)
			})
			said := 0
			for r, err := range errs {
				switch {
				case err == nil:
					t.Errorf("rank %d: the checks passed without shared memory", r)
				case errors.Is(err, tt.why) && strings.Contains(err.Error(), tt.say):
					said++
				case !tt.some:
					t.Errorf("rank %d: %v; want an error that wraps %q and says %q", r, err, tt.why, tt.say)
				}
			}
			if said == 0 {
				t.Errorf("no rank said %q (%v): %v", tt.say, tt.why, errs)
			}
		})
	}
}

// TestReportSaysSharedMemoryLost: gorun --topo's report (prims.Report)
// says when the ranks of one host share memory but rank 0's Shared
// algorithms do not run in it, whether its setup failed unseen or mapping
// it failed, and says nothing of the kind when they do.
func TestReportSaysSharedMemoryLost(t *testing.T) {
	const p = 2
	for _, tt := range []struct {
		name   string
		wrap   func(t transport.Transport) transport.Transport
		before func(c *spmd.Comm)
		say    string // what the report says, or "" for nothing of shared memory lost
	}{
		{"shared", nil, nil, ""},
		{"failure unseen", nil, func(c *spmd.Comm) { prims.LoseSharedMemory(c, errInjected) }, errInjected.Error()},
		{"mapping fails", func(t transport.Transport) transport.Transport {
			return unmappable{opaque{t}, t.(transport.Sharer)}
		}, nil, "mapping the memory of the Shared algorithms"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out [p]bytes.Buffer
			errs := runOnSHM(t, p, tt.wrap, nil, func(ctx context.Context, w *spmd.World) error {
				if tt.before != nil {
					tt.before(w.Comm)
				}
				return prims.Report(ctx, w, &out[w.Rank()])
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			got := out[0].String()
			const lost = "shared memory: not in use on rank 0"
			switch {
			case !strings.Contains(got, "shared memory: yes"):
				t.Errorf("the report does not say the ranks share memory:\n%s", got)
			case tt.say == "" && strings.Contains(got, lost):
				t.Errorf("the report says shared memory is lost:\n%s", got)
			case tt.say != "" && (!strings.Contains(got, lost) || !strings.Contains(got, tt.say)):
				t.Errorf("the report does not say %q and %q:\n%s", lost, tt.say, got)
			}
		})
	}
}

// TestSharedMemorySays: prims.SharedMemory says why the ranks of a
// communicator do not share memory, and what mapping it failed with.
func TestSharedMemorySays(t *testing.T) {
	const p = 2
	tests := []struct {
		name string
		wrap func(t transport.Transport) transport.Transport
		why  error
		say  string
	}{
		{"shared", nil, nil, ""},
		{"transport maps none", func(t transport.Transport) transport.Transport { return opaque{t} }, spmd.ErrNotShared, "on one host, but their transport maps none"},
		{"mapping fails", func(t transport.Transport) transport.Transport {
			return unmappable{opaque{t}, t.(transport.Sharer)}
		}, errInjected, "mapping the memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := runOnSHM(t, p, tt.wrap, nil, func(ctx context.Context, w *spmd.World) error {
				err := prims.SharedMemory(w.Comm)
				switch {
				case tt.why == nil && err != nil:
					return err
				case tt.why != nil && (!errors.Is(err, tt.why) || !strings.Contains(fmt.Sprint(err), tt.say)):
					return fmt.Errorf("SharedMemory: %v; want an error that wraps %q and says %q", err, tt.why, tt.say)
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
	// Ranks on two hosts are not expected to share memory, and the error
	// says that that is why.
	spmdtest.RunOn(t, spmdtest.Mixed, 4, func(ctx context.Context, w *spmd.World) error {
		if err := prims.SharedMemory(w.Comm); !errors.Is(err, spmd.ErrNotShared) || !strings.Contains(err.Error(), "on 2 hosts") {
			return fmt.Errorf("SharedMemory on two hosts: %v; want it to say they are on 2 hosts", err)
		}
		return nil
	})
}

// TestSharedFallbackTraced: a forced Shared call on ranks that cannot
// share memory runs a message algorithm, and the trace names the one that
// ran, not shared.
func TestSharedFallbackTraced(t *testing.T) {
	const p = 3
	var cks []check
	for _, coll := range topo.Collectives {
		if prims.Applies(coll, topo.Shared) {
			cks = append(cks, check{coll, topo.Shared, 100, false})
		}
	}
	for _, tt := range []struct {
		name string
		wrap func(t transport.Transport) transport.Transport
		want map[string]string // collective -> the algorithm its trace names
	}{
		{"shared", nil, map[string]string{}},
		{"transport maps none", func(t transport.Transport) transport.Transport { return opaque{t} }, map[string]string{
			"allreduce":     string(topo.RecursiveDoubling),
			"broadcast":     string(topo.Tree),
			"reduce":        string(topo.Tree),
			"gather":        string(topo.Linear),
			"scatter":       string(topo.Linear),
			"allgather":     string(topo.RecursiveDoubling),
			"reducescatter": string(topo.Ring),
			"alltoall":      string(topo.Linear),
			"barrier":       string(topo.RecursiveDoubling),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := make([]*trace.Recorder, p)
			traced := func(r int) []spmd.Option {
				rec, err := trace.New(dir, trace.Header{Rank: r, Size: p})
				if err != nil {
					t.Fatal(err)
				}
				recs[r] = rec
				return []spmd.Option{spmd.WithTrace(rec)}
			}
			errs := runOnSHM(t, p, tt.wrap, traced, func(ctx context.Context, w *spmd.World) error {
				for _, k := range cks {
					if err := run[float32](ctx, w.Comm, k); err != nil {
						return err
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r, rec := range recs {
				f, err := trace.ReadFile(rec.Path())
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				seen := 0
				for _, e := range f.Events {
					if e.Kind != trace.CollectiveEvent {
						continue
					}
					seen++
					coll, algo := f.Str(e.Name), f.Str(e.Algo)
					want, ok := tt.want[coll]
					if !ok {
						want = string(topo.Shared)
					}
					if algo != want {
						t.Errorf("rank %d: the trace says %s ran %s, want %s", r, coll, algo, want)
					}
				}
				if seen != len(cks) {
					t.Errorf("rank %d: %d collectives in the trace, want %d", r, seen, len(cks))
				}
			}
		})
	}
}

// opaque is a transport that offers only transport.Transport's methods,
// hiding its optional interfaces: transport.Sharer among them, so that its
// ranks share no memory, as a wrapper that forgot to pass it on would.
type opaque struct{ transport.Transport }

// unmappable is a transport whose ranks can share memory but whose shared
// memory fails to map, as a full or unwritable shm directory would make it.
type unmappable struct {
	opaque
	sh transport.Sharer
}

var _ transport.Sharer = unmappable{}

func (u unmappable) Shares(ranks []int) bool { return u.sh.Shares(ranks) }

func (u unmappable) Share(key string, ranks []int, size int) ([]byte, error) {
	return nil, fmt.Errorf("shared area %q: %w", key, errInjected)
}

func (u unmappable) Unshare(key string) error { return nil }

// runOnSHM runs f as every rank of an n-rank job on one host over net/shm,
// as spmdtest.RunOn does, each rank's transport wrapped by wrap (if set)
// and its world given the options opts returns (if set), and returns each
// rank's error. A rank that fails is closed at once, so that ranks
// waiting on it fail instead of hanging.
func runOnSHM(t *testing.T, n int, wrap func(transport.Transport) transport.Transport, opts func(rank int) []spmd.Option,
	f func(ctx context.Context, w *spmd.World) error) []error {
	t.Helper()
	id, secret := make([]byte, 8), make([]byte, 32)
	rand.Read(id)
	rand.Read(secret)
	jobID := fmt.Sprintf("test%x", id)
	t.Cleanup(func() { shm.Cleanup(jobID) })
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	ts := make([]transport.Transport, n)
	for i := range ts {
		tr, err := shm.New(jobID, i, all, n, secret)
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
		ts[i] = tr
		if wrap != nil {
			ts[i] = wrap(tr)
		}
	}
	ws := make([]*spmd.World, n)
	for i, tr := range ts {
		var o []spmd.Option
		if opts != nil {
			o = opts(i)
		}
		w, err := spmd.New(tr, i, spmdtest.Peers(n, "shm"), o...)
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
		ws[i] = w
	}
	ctx, cancel := context.WithTimeout(context.Background(), spmdtest.Timeout)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			if errs[i] = f(ctx, w); errs[i] != nil {
				w.Close()
			}
		})
	}
	wg.Wait()
	for _, w := range ws {
		w.Close()
	}
	return errs
}
