package dp

import (
	"context"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Bucket is a contiguous range [Lo, Hi) of the model's flat gradient
// buffer: Grads is that range, Params the parameters it holds, in the
// order backward produces them.
type Bucket struct {
	Index  int
	Lo, Hi int
	Grads  []float32
	Params []*nn.Param
}

// Work is a reduction in flight.
type Work interface {
	// Wait blocks until the bucket holds the mean of every rank's
	// gradients, or ctx ends.
	Wait(ctx context.Context) error
}

// Hook reduces buckets across the ranks of a communicator. Start is
// called once per bucket per step, in bucket order, from the goroutine
// that runs backward; it must not block on the other ranks, and the
// bucket's Grads belong to the hook until its Work's Wait returns. A hook
// that keeps state per bucket (error feedback, say) keys it by Index.
type Hook interface {
	Start(ctx context.Context, c *spmd.Comm, b *Bucket) (Work, error)
}

// AllReduceMean is the default hook: a sum all-reduce, then division by
// the number of ranks.
type AllReduceMean struct{}

// Start issues the bucket's all-reduce.
func (AllReduceMean) Start(ctx context.Context, c *spmd.Comm, b *Bucket) (Work, error) {
	return &meanWork{req: prims.IAllReduce(ctx, c, b.Grads, prims.Sum[float32]()), grads: b.Grads, n: c.Size()}, nil
}

type meanWork struct {
	req   *prims.Request
	grads []float32
	n     int
}

// Done is closed when the all-reduce completes.
func (w *meanWork) Done() <-chan struct{} { return w.req.Done() }

func (w *meanWork) Wait(ctx context.Context) error {
	if err := w.req.Wait(ctx); err != nil {
		return err
	}
	if w.n > 1 {
		scale(w.grads, 1/float32(w.n))
	}
	return nil
}

func scale(v []float32, k float32) {
	for i := range v {
		v[i] *= k
	}
}
