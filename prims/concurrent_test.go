package prims_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
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
