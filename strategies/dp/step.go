package dp

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Step runs one optimizer step over this rank's micro-batches: the
// gradients of all but the last accumulate locally (NoSync), the last
// backward reduces their sum overlapped with its computation, and the
// optimizer then updates the whole model from the mean. Each micro-batch's
// loss is scaled by 1/len(micro), so that k micro-batches of b examples
// train exactly as one batch of k·b. It returns this rank's mean loss.
//
// Under gorun --profile it records the regions goprof breaks a step down
// by: "step" around it all, "forward", "backward" and "optimizer" (the
// computation), and "wait" for the reductions backward did not hide.
func (d *DDP) Step(ctx context.Context, micro []*nn.Batch, opt nn.Optimizer) (float32, error) {
	defer trace.Region(ctx, "step").End()
	last := len(micro) - 1
	// Accumulate runs each micro-batch's Forward, then the callback: each
	// callback ends a forward region and starts the next.
	fw := trace.Region(ctx, "forward")
	loss, err := nn.Accumulate(d.model, micro, func(i int, scale float32) {
		fw.End()
		bw := trace.Region(ctx, "backward")
		if i < last {
			d.NoSync(func() error { d.Backward(ctx, scale); return nil })
		} else {
			d.Backward(ctx, scale)
		}
		bw.End()
		if i < last {
			fw = trace.Region(ctx, "forward")
		}
	})
	if err != nil {
		fw.End() // the forward that failed
		return 0, fmt.Errorf("dp: %w", err)
	}
	wait := trace.Region(ctx, "wait")
	err = d.Wait(ctx)
	wait.End()
	if err != nil {
		return 0, err
	}
	defer trace.Region(ctx, "optimizer").End()
	st := d.model.Store()
	opt.Step(st.W, st.G)
	return loss, nil
}

// MeanLoss is the mean of every rank's loss, for reporting.
func (d *DDP) MeanLoss(ctx context.Context, loss float32) (float32, error) {
	if d.comm.Size() == 1 {
		return loss, nil
	}
	v := []float64{float64(loss)}
	if err := prims.AllReduce(ctx, d.comm, v, prims.Sum[float64]()); err != nil {
		return 0, fmt.Errorf("dp: mean loss: %w", err)
	}
	return float32(v[0] / float64(d.comm.Size())), nil
}
