package prims_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// nbRanks are the rank counts of the non-blocking tests.
var nbRanks = []int{1, 2, 3, 4, 5}

// nbColls are the collectives that have non-blocking forms.
var nbColls = []topo.Collective{topo.AllReduce, topo.ReduceScatter, topo.AllGather, topo.Broadcast}

// eachJob runs f as every rank of a job of every transport and rank count
// of nbRanks.
func eachJob(t *testing.T, f func(ctx context.Context, w *spmd.World) error) {
	for _, kind := range spmdtest.Kinds {
		for _, p := range nbRanks {
			t.Run(fmt.Sprintf("%s/p=%d", kind, p), func(t *testing.T) {
				spmdtest.RunOn(t, kind, p, f)
			})
		}
	}
}

// issued is a non-blocking call issued on this rank, and the check of its
// result once it has completed.
type issued struct {
	what    string
	req     *prims.Request
	check   func() error
	trivial bool // no elements: completed at issue
}

// issue issues the non-blocking form of the call k describes (an empty
// algorithm lets topo choose) and returns it with the check of its result
// against the naive reference, as run does for the blocking calls.
func issue[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) issued {
	e := issueOnly[T](ctx, c, k)
	e.trivial = k.n == 0
	return e
}

func issueOnly[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) issued {
	p, r := c.Size(), c.Rank()
	opt := prims.WithAlgo(k.algo)
	sum := prims.Sum[T]()
	what := fmt.Sprintf("%T %v", *new(T), k)
	switch k.coll {
	case topo.AllReduce:
		buf := fill(k.n, func(i int) T { return reduceValue[T](r, i) })
		want := reference(p, sum)
		return issued{what: what, req: prims.IAllReduce(ctx, c, buf, sum, opt), check: func() error { return expect("buf", buf, k.n, want) }}
	case topo.ReduceScatter:
		send := fill(k.n, func(i int) T { return reduceValue[T](r, i) })
		lo, hi := prims.Block(k.n, p, r)
		recv := make([]T, hi-lo)
		if k.inPlace {
			recv = send[lo:hi]
		}
		want := reference(p, sum)
		return issued{what: what, req: prims.IReduceScatter(ctx, c, send, recv, sum, opt), check: func() error {
			return expect("recv", recv, hi-lo, func(i int) T { return want(lo + i) })
		}}
	case topo.AllGather:
		kk := blockLen(k.n, p)
		send := fill(kk, func(i int) T { return tagValue[T](r, i) })
		recv := make([]T, p*kk)
		if k.inPlace {
			copy(recv[r*kk:], send)
			send = recv[r*kk : (r+1)*kk]
		}
		return issued{what: what, req: prims.IAllGather(ctx, c, send, recv, opt), check: func() error { return expect("recv", recv, p*kk, gathered[T](kk)) }}
	}
	root := k.n % p
	want := func(i int) T { return tagValue[T](root, i) }
	buf := fill(k.n, func(int) T { return 7 })
	if r == root {
		buf = fill(k.n, want)
	}
	return issued{what: what, req: prims.IBroadcast(ctx, c, buf, root, opt), check: func() error { return expect("buf", buf, k.n, want) }}
}

// waitAll waits for every call, in reverse order, and checks their
// results. A watcher per call checks that the calls complete in issue
// order: when one has completed, every earlier one has; one of no
// elements completes at issue.
func waitAll(ctx context.Context, calls []issued) error {
	var wg sync.WaitGroup
	disorder := make([]error, len(calls))
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-calls[i].req.Done():
			case <-ctx.Done():
				return
			}
			for _, e := range calls[:i] {
				if done, _ := e.req.Test(); !done && !calls[i].trivial {
					disorder[i] = fmt.Errorf("%s completed before %s, issued earlier", calls[i].what, e.what)
					return
				}
			}
		}()
	}
	var errs []error
	for i := len(calls) - 1; i >= 0; i-- {
		if err := calls[i].req.Wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", calls[i].what, err))
		}
	}
	wg.Wait()
	errs = append(errs, disorder...)
	for _, e := range calls {
		if err := e.check(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.what, err))
		}
	}
	return errors.Join(errs...)
}

// TestNonBlocking issues every non-blocking collective with every
// algorithm that implements it, and with Choose's, for every count,
// in place and out of place, all back to back before waiting for any:
// the results are the naive reference's, as the blocking calls' are, and
// the calls complete in issue order.
func TestNonBlocking(t *testing.T) {
	eachJob(t, func(ctx context.Context, w *spmd.World) error {
		p := w.Size()
		var calls []issued
		for _, coll := range nbColls {
			for _, algo := range append([]topo.Algo{""}, prims.Algos(coll)...) {
				for _, n := range []int{0, 1, p + 1, 1000} {
					calls = append(calls, issue[float32](ctx, w.Comm, check{coll, algo, n, n%2 == 1}))
				}
			}
			calls = append(calls, issue[int64](ctx, w.Comm, check{coll, "", 3<<14 + 5, false}))
		}
		return waitAll(ctx, calls)
	})
}

// TestNonBlockingBuckets issues the all-reduces of 20 gradient buckets of
// different sizes back to back, with a blocking all-reduce among them, as
// a data-parallel driver does during backward. The blocking call runs
// after the buckets issued before it: when it returns they have all
// completed.
func TestNonBlockingBuckets(t *testing.T) {
	const buckets = 20
	eachJob(t, func(ctx context.Context, w *spmd.World) error {
		r, p := w.Rank(), w.Size()
		sum := prims.Sum[float32]()
		want := reference(p, sum)
		bufs := make([][]float32, buckets)
		reqs := make([]*prims.Request, buckets)
		for b := range bufs {
			bufs[b] = fill(1+(b*7919)%30000, func(i int) float32 { return reduceValue[float32](r, i+b) })
			reqs[b] = prims.IAllReduce(ctx, w.Comm, bufs[b], sum)
			if b != buckets/2 {
				continue
			}
			mid := fill(3000, func(i int) float32 { return reduceValue[float32](r, i) })
			if err := prims.AllReduce(ctx, w.Comm, mid, sum); err != nil {
				return fmt.Errorf("blocking all-reduce among the buckets: %w", err)
			}
			for e, req := range reqs[:b+1] {
				if done, _ := req.Test(); !done {
					return fmt.Errorf("the blocking all-reduce returned before bucket %d, issued earlier, completed", e)
				}
			}
			if err := expect("blocking", mid, len(mid), want); err != nil {
				return err
			}
		}
		for b := buckets - 1; b >= 0; b-- {
			if err := reqs[b].Wait(ctx); err != nil {
				return fmt.Errorf("bucket %d: %w", b, err)
			}
		}
		for b, buf := range bufs {
			if err := expect(fmt.Sprintf("bucket %d", b), buf, len(buf), func(i int) float32 { return want(i + b) }); err != nil {
				return err
			}
		}
		if err := quiet(w.Comm); err != nil {
			return err
		}
		return nil
	})
}

// TestNonBlockingOverlaps issues a large all-reduce and computes until it
// has completed, without calling Wait: the collective progresses in the
// background while the caller works.
func TestNonBlockingOverlaps(t *testing.T) {
	eachJob(t, func(ctx context.Context, w *spmd.World) error {
		buf := fill(1<<18, func(i int) float32 { return reduceValue[float32](w.Rank(), i) })
		req := prims.IAllReduce(ctx, w.Comm, buf, prims.Sum[float32](), prims.WithAlgo(topo.Ring))
		work := fill(4096, func(i int) float64 { return float64(i) })
		var acc float64
		for rounds := 0; ; rounds++ {
			select {
			case <-req.Done():
			case <-ctx.Done():
				return fmt.Errorf("the all-reduce did not complete while the caller computed (%d rounds)", rounds)
			default:
				for _, x := range work {
					acc += x
				}
				// Ranks outnumber cores: let the others have theirs.
				runtime.Gosched()
				continue
			}
			break
		}
		if err := req.Wait(ctx); err != nil {
			return err
		}
		if acc < 0 {
			return fmt.Errorf("negative sum") // keeps the work
		}
		return expect("buf", buf, len(buf), reference(w.Size(), prims.Sum[float32]()))
	})
}

// TestNonBlockingTrivial: a call of no elements, or on one rank,
// completes at issue, even behind a call that cannot complete yet.
func TestNonBlockingTrivial(t *testing.T) {
	eachJob(t, func(ctx context.Context, w *spmd.World) error {
		var pending *prims.Request
		if w.Rank() == 0 { // the others issue theirs later
			pending = prims.IAllReduce(ctx, w.Comm, make([]float64, 100), prims.Sum[float64]())
		}
		for _, req := range []*prims.Request{
			prims.IAllReduce(ctx, w.Comm, []float64(nil), prims.Sum[float64]()),
			prims.IReduceScatter(ctx, w.Comm, []int32{}, []int32{}, prims.Sum[int32]()),
			prims.IAllGather(ctx, w.Comm, []uint8{}, []uint8{}),
			prims.IBroadcast(ctx, w.Comm, []float32{}, 0),
		} {
			if done, err := req.Test(); !done || err != nil {
				return fmt.Errorf("a call of no elements: done %v, error %v; want done at issue", done, err)
			}
		}
		if w.Size() == 1 {
			buf := []float32{1, 2}
			if done, err := prims.IAllReduce(ctx, w.Comm, buf, prims.Sum[float32]()).Test(); !done || err != nil {
				return fmt.Errorf("a call on one rank: done %v, error %v; want done at issue", done, err)
			}
			return expect("buf", buf, 2, func(i int) float32 { return float32(i + 1) })
		}
		if pending == nil {
			pending = prims.IAllReduce(ctx, w.Comm, make([]float64, 100), prims.Sum[float64]())
		}
		return pending.Wait(ctx)
	})
}

// TestNonBlockingWaitContext: a Wait whose context has ended returns the
// context's error, and the collective completes later all the same.
func TestNonBlockingWaitContext(t *testing.T) {
	for _, kind := range spmdtest.Kinds {
		for _, p := range nbRanks[1:] {
			t.Run(fmt.Sprintf("%s/p=%d", kind, p), func(t *testing.T) {
				waited := make(chan struct{}) // rank 0 gave up waiting; the others issue then
				spmdtest.RunOn(t, kind, p, func(ctx context.Context, w *spmd.World) error {
					buf := fill(5000, func(i int) float32 { return reduceValue[float32](w.Rank(), i) })
					if w.Rank() != 0 {
						<-waited
					}
					req := prims.IAllReduce(ctx, w.Comm, buf, prims.Sum[float32]())
					if w.Rank() == 0 {
						gone, cancel := context.WithCancel(ctx)
						cancel()
						err := req.Wait(gone)
						close(waited)
						if !errors.Is(err, context.Canceled) {
							return fmt.Errorf("Wait with a cancelled context: got %v, want context.Canceled", err)
						}
						if done, _ := req.Test(); done {
							return fmt.Errorf("the all-reduce completed before the other ranks issued theirs")
						}
					}
					if err := req.Wait(ctx); err != nil {
						return err
					}
					return expect("buf", buf, len(buf), reference(p, prims.Sum[float32]()))
				})
			})
		}
	}
}

// TestNonBlockingDup runs non-blocking all-reduces on the world and on a
// duplicate of it at once, from two goroutines of every rank: each
// communicator has its own state and queue, and their traffic does not
// mix.
func TestNonBlockingDup(t *testing.T) {
	eachJob(t, func(ctx context.Context, w *spmd.World) error {
		// The model, fitted before Dup, holds for the duplicate too.
		if err := prims.AllReduce(ctx, w.Comm, make([]float32, 10), prims.Sum[float32]()); err != nil {
			return err
		}
		d, err := w.Dup(ctx)
		if err != nil {
			return err
		}
		defer d.Free()
		if prims.SameState(w.Comm, d) {
			return fmt.Errorf("the duplicate shares its parent's state")
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*spmd.Comm{w.Comm, d} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var calls []issued
				for round := range 6 {
					calls = append(calls,
						issue[float32](ctx, c, check{topo.AllReduce, "", 2000 + 1000*i + round, false}),
						issue[float32](ctx, c, check{topo.AllGather, topo.Shared, 100 + round, i == 0}))
				}
				errs[i] = waitAll(ctx, calls)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		return prims.Barrier(ctx, d) // a blocking collective on the duplicate
	})
}
