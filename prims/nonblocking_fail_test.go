package prims_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestNonBlockingPeerLost kills a rank while the others have all-reduces
// in flight that need it: every survivor's requests fail with an error
// wrapping spmd.ErrPeerLost that names the dead rank, the queued ones as
// well as the one running, and nobody hangs.
func TestNonBlockingPeerLost(t *testing.T) {
	for _, kind := range spmdtest.Kinds {
		for _, p := range nbRanks[1:] {
			for _, algo := range []topo.Algo{topo.Ring, topo.Shared} {
				t.Run(fmt.Sprintf("%s/p=%d/%s", kind, p, algo), func(t *testing.T) {
					peerLost(t, kind, p, algo)
				})
			}
		}
	}
}

func peerLost(t *testing.T, kind spmdtest.Kind, p int, algo topo.Algo) {
	const queued = 8
	victim := p / 2
	j := spmdtest.NewJob(t, kind, p)
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	errs := make([][]error, p)
	var issuedAll, wg sync.WaitGroup
	issuedAll.Add(p)
	for r, w := range j.Worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One all-reduce with every rank, to be sure all are up.
			first := prims.IAllReduce(ctx, w.Comm, make([]float32, 1<<14), prims.Sum[float32](), prims.WithAlgo(algo))
			if err := first.Wait(ctx); err != nil {
				errs[r] = []error{fmt.Errorf("before the kill: %w", err)}
				issuedAll.Done()
				return
			}
			if r == victim {
				issuedAll.Done()
				return
			}
			reqs := make([]*prims.Request, queued)
			for i := range reqs {
				reqs[i] = prims.IAllReduce(ctx, w.Comm, make([]float32, 1<<14+i), prims.Sum[float32](), prims.WithAlgo(algo))
			}
			issuedAll.Done()
			for _, req := range reqs {
				errs[r] = append(errs[r], req.Wait(ctx))
			}
		}()
	}
	issuedAll.Wait()
	j.Kill(victim)
	if !waitTimeout(&wg, hang) {
		t.Fatalf("survivors still waiting %v after rank %d was killed", hang, victim)
	}
	for r, es := range errs {
		if r == victim {
			continue
		}
		if len(es) != queued {
			t.Errorf("rank %d: %v", r, errors.Join(es...))
			continue
		}
		for i, err := range es {
			var pe *spmd.PeerError
			if !errors.Is(err, spmd.ErrPeerLost) || !errors.As(err, &pe) || pe.Rank != victim {
				t.Errorf("rank %d, request %d: got %v, want an error wrapping ErrPeerLost naming rank %d", r, i, err, victim)
			}
		}
	}
}

// TestNonBlockingClosed closes a rank's world while it has requests
// queued that no other rank takes part in: every one of them fails, none
// hangs, and the executor exits.
func TestNonBlockingClosed(t *testing.T) {
	for _, kind := range spmdtest.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			j := spmdtest.NewJob(t, kind, 3)
			defer j.Close()
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			w := j.Worlds[0]
			reqs := make([]*prims.Request, 6)
			for i := range reqs {
				reqs[i] = prims.IAllReduce(ctx, w.Comm, make([]float64, 1000), prims.Sum[float64](), prims.WithAlgo(topo.Ring))
			}
			w.Close()
			for i, req := range reqs {
				if err := req.Wait(ctx); !errors.Is(err, spmd.ErrClosed) {
					t.Errorf("request %d queued at Close: got %v, want ErrClosed", i, err)
				}
			}
			if err := quiet(w.Comm); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestNonBlockingFreed frees a communicator while its rank has requests
// queued on it that no other rank takes part in: every one of them fails
// with spmd.ErrFreed, and the parent goes on.
func TestNonBlockingFreed(t *testing.T) {
	spmdtest.RunOn(t, spmdtest.Mem, 3, func(ctx context.Context, w *spmd.World) error {
		d, err := w.Dup(ctx)
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			reqs := make([]*prims.Request, 6)
			for i := range reqs {
				reqs[i] = prims.IBroadcast(ctx, d, make([]int32, 100+i), 1)
			}
			if err := d.Free(); err != nil {
				return err
			}
			for i, req := range reqs {
				if err := req.Wait(ctx); !errors.Is(err, spmd.ErrFreed) {
					return fmt.Errorf("request %d queued at Free: got %v, want ErrFreed", i, err)
				}
			}
		}
		return prims.AllReduce(ctx, w.Comm, make([]float32, 100), prims.Sum[float32]())
	})
}

// TestNonBlockingBlockingGivesUp: a blocking call whose context ends
// while it waits for the communicator's queue fails with the context's
// error and breaks the communicator, as a blocking call that gives up
// does: the queued request fails, and the other ranks' calls fail with
// ErrAborted instead of waiting for this rank.
func TestNonBlockingBlockingGivesUp(t *testing.T) {
	for _, p := range nbRanks[1:] {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			gaveUp := make(chan struct{})
			spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
				buf := make([]float64, 1000)
				if w.Rank() != 0 {
					<-gaveUp
					err := prims.IAllReduce(ctx, w.Comm, buf, prims.Sum[float64]()).Wait(ctx)
					if !errors.Is(err, prims.ErrAborted) {
						return fmt.Errorf("got %v, want ErrAborted", err)
					}
					// The notice says why rank 0 gave up.
					if !strings.Contains(err.Error(), "rank 0: another rank abandoned a collective: context canceled") {
						return fmt.Errorf("got %v, want rank 0's reason", err)
					}
					return nil
				}
				req := prims.IAllReduce(ctx, w.Comm, buf, prims.Sum[float64]())
				gone, cancel := context.WithCancel(ctx)
				cancel()
				err := prims.AllReduce(gone, w.Comm, make([]float64, 10), prims.Sum[float64]())
				close(gaveUp)
				if !errors.Is(err, context.Canceled) {
					return fmt.Errorf("blocking call behind a queued one, with its context cancelled: got %v, want context.Canceled", err)
				}
				if err := req.Wait(ctx); err == nil {
					return fmt.Errorf("the queued all-reduce succeeded on a broken communicator")
				}
				return nil
			})
		})
	}
}

// TestNonBlockingNoLeak issues many requests and waits for them: no
// goroutine is left behind, no executor above all.
func TestNonBlockingNoLeak(t *testing.T) {
	var before, after int
	spmdtest.RunOn(t, spmdtest.SHM, 4, func(ctx context.Context, w *spmd.World) error {
		buf := make([]float32, 10000)
		round := func() error {
			reqs := make([]*prims.Request, 10)
			for i := range reqs {
				reqs[i] = prims.IAllReduce(ctx, w.Comm, buf[:1000*i+1], prims.Sum[float32]())
			}
			for _, req := range reqs {
				if err := req.Wait(ctx); err != nil {
					return err
				}
			}
			if err := quiet(w.Comm); err != nil {
				return err
			}
			return w.Barrier(ctx)
		}
		// The communicator's state, its notice receives and the links
		// first.
		if err := round(); err != nil {
			return err
		}
		if w.Rank() == 0 {
			before = runtime.NumGoroutine()
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		for range 10 {
			if err := round(); err != nil {
				return err
			}
		}
		if w.Rank() == 0 {
			// An executor clears the queue before it completes its last
			// request, and returns after: give it that moment.
			deadline := time.Now().Add(hang)
			for after = runtime.NumGoroutine(); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
				time.Sleep(time.Millisecond)
			}
		}
		return w.Barrier(ctx)
	})
	if after > before {
		t.Errorf("%d goroutines after 10 rounds of requests, %d before", after, before)
	}
}

// quiet fails unless c's executor leaves once every request has completed
// (a hang guard of seconds, not a timing).
func quiet(c *spmd.Comm) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := prims.Drained(ctx, c); err != nil {
		return fmt.Errorf("every request completed, and the communicator still has an executor: %w", err)
	}
	return nil
}
