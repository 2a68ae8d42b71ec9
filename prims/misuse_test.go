package prims_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// A collective call made while another is in progress on its
// communicator (from another goroutine: MarkBusy stands for it) fails at
// once with ErrConcurrent, where two goroutines' calls shared a
// communicator's tags and scratch and returned wrong sums with no error;
// a trivial call, which moves nothing, passes, and once the other call is
// over the communicator works.
func TestConcurrentCallFails(t *testing.T) {
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		buf := []float32{1}
		prims.MarkBusy(w.Comm, true)
		err := prims.AllReduce(ctx, w.Comm, buf, prims.Sum[float32]())
		if !errors.Is(err, prims.ErrConcurrent) {
			t.Errorf("rank %d: a call beside another: %v, want ErrConcurrent", w.Rank(), err)
		}
		if err := prims.AllReduce(ctx, w.Comm, []float32{}, prims.Sum[float32]()); err != nil {
			t.Errorf("rank %d: a trivial call beside another: %v", w.Rank(), err)
		}
		prims.MarkBusy(w.Comm, false)
		if err := prims.AllReduce(ctx, w.Comm, buf, prims.Sum[float32]()); err != nil || buf[0] != 2 {
			t.Errorf("rank %d: after: %v, sum %v, want 2", w.Rank(), err, buf[0])
		}
		return nil
	})
}

// An all-gather whose send overlaps recv other than as the rank's own
// block is refused (ErrCount) before it starts; in place and apart work.
func TestAllGatherRefusesAnOverlap(t *testing.T) {
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		r := w.Rank()
		recv := []int32{0, 0, 0, 0}
		other := recv[2*(1-r) : 2*(1-r)+2] // the other rank's block
		other[0], other[1] = int32(10*r), int32(10*r+1)
		if err := prims.AllGather(ctx, w.Comm, other, recv); !errors.Is(err, prims.ErrCount) {
			t.Errorf("rank %d: send in the other rank's block: %v, want ErrCount", r, err)
		}
		if err := prims.AllGather(ctx, w.Comm, recv[1:3], recv); !errors.Is(err, prims.ErrCount) {
			t.Errorf("rank %d: send across two blocks: %v, want ErrCount", r, err)
		}
		mine := recv[2*r : 2*r+2]
		mine[0], mine[1] = int32(10*r), int32(10*r+1)
		if err := prims.AllGather(ctx, w.Comm, mine, recv); err != nil || recv[0] != 0 || recv[3] != 11 {
			t.Errorf("rank %d: in place: %v, %v", r, err, recv)
		}
		apart := []int32{int32(10 * r), int32(10*r + 1)}
		if err := prims.AllGather(ctx, w.Comm, apart, recv); err != nil || recv[1] != 1 || recv[2] != 10 {
			t.Errorf("rank %d: apart: %v, %v", r, err, recv)
		}
		return nil
	})
}

// Under GORUN_CHECK_COLLECTIVES=1 calls that do not match fail together
// with ErrMismatch naming the rank and both calls, where a broadcast
// whose ranks named different roots returned nil on both and shifted the
// next broadcasts' data by one, and a Shared all-reduce of Sum on one
// rank and Max on the other returned different sums; matching calls run
// as without the check.
func TestCheckCollectives(t *testing.T) {
	prims.SetChecking(true)
	defer prims.SetChecking(false)
	spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
		r := w.Rank()
		mismatch := func(what string, err error, want string) {
			t.Helper()
			if !errors.Is(err, prims.ErrMismatch) || !strings.Contains(err.Error(), want) {
				t.Errorf("rank %d: %s: %v, want ErrMismatch saying %q", r, what, err, want)
			}
		}
		buf := []float32{float32(r), 1}
		root := 0
		if r == 2 {
			root = 2
		}
		mismatch("roots 0, 0, 2", prims.Broadcast(ctx, w.Comm, buf, root, prims.WithAlgo(topo.Tree)),
			"rank 2 called broadcast of 8 bytes of float32, root 2, algorithm tree, where rank 0 called broadcast of 8 bytes of float32, root 0, algorithm tree")
		op := prims.Sum[float32]()
		if r == 1 {
			op = prims.Max[float32]()
		}
		mismatch("sum and max", prims.AllReduce(ctx, w.Comm, buf, op), "rank 1 called allreduce of 8 bytes of float32, op max")
		if r == 2 {
			mismatch("broadcast beside all-reduce", prims.Broadcast(ctx, w.Comm, buf, 0), "rank 2 called broadcast of 8 bytes of float32, root 0, where rank 0 called allreduce")
		} else {
			mismatch("all-reduce beside broadcast", prims.AllReduce(ctx, w.Comm, buf, prims.Sum[float32]()), "rank 2 called broadcast")
		}
		for i := range 3 {
			v := []float32{float32(10*i + r)}
			if err := prims.Broadcast(ctx, w.Comm, v, i%3); err != nil || v[0] != float32(10*i+i%3) {
				t.Errorf("rank %d: matching broadcast %d: %v, got %v", r, i, err, v)
			}
		}
		return nil
	})
}

// Under the check, non-blocking calls, trivial ones among them (which run
// on the issuing goroutine beside the executor), and blocking ones mix
// and give the right sums.
func TestCheckCollectivesNonBlocking(t *testing.T) {
	prims.SetChecking(true)
	defer prims.SetChecking(false)
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		var reqs []*prims.Request
		bufs := make([][]float32, 20)
		for i := range bufs {
			bufs[i] = []float32{float32(i)}
			reqs = append(reqs, prims.IAllReduce(ctx, w.Comm, bufs[i], prims.Sum[float32]()))
			reqs = append(reqs, prims.IAllReduce(ctx, w.Comm, []float32{}, prims.Sum[float32]()))
		}
		for i, r := range reqs {
			if err := r.Wait(ctx); err != nil {
				t.Errorf("rank %d: request %d: %v", w.Rank(), i, err)
			}
		}
		for i, b := range bufs {
			if b[0] != float32(2*i) {
				t.Errorf("rank %d: sum %d = %v, want %d", w.Rank(), i, b[0], 2*i)
			}
		}
		return prims.Barrier(ctx, w.Comm)
	})
}
