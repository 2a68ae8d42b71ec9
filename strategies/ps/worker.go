package ps

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// worker is a worker rank's state.
type worker struct {
	push, reply [][]byte // per server
	step        int
	version     int // the oldest version among the servers' last replies
	maxStale    int
}

func (d *PS) startWorker(ctx context.Context) error {
	wk := &worker{}
	for _, sh := range d.shards {
		wk.push = append(wk.push, newMsg(sh[1]-sh[0]))
		wk.reply = append(wk.reply, newMsg(sh[1]-sh[0]))
	}
	d.wrk = wk
	return d.pull(ctx)
}

// Step runs one step on a worker: forward and backward over its
// micro-batches (each loss scaled by 1/len(micro)), a push of each
// server's gradient shard, and a pull of the parameters the staleness
// bound lets it use next. It returns the worker's mean loss. Under gorun
// --profile it records the regions "step" and "forward+backward" (the
// computation); the push and the pull are its sends and receives.
func (d *PS) Step(ctx context.Context, micro []*nn.Batch) (float32, error) {
	wk := d.wrk
	if wk == nil {
		return 0, fmt.Errorf("ps: rank %d is a server: it runs Serve, not Step", d.comm.Rank())
	}
	if wk.step >= d.cfg.Steps {
		return 0, fmt.Errorf("ps: step %d: the servers serve %d steps", wk.step, d.cfg.Steps)
	}
	defer trace.Region(ctx, "step").End()
	st := d.model.Store()
	compute := trace.Region(ctx, "forward+backward")
	loss, err := nn.Accumulate(d.model, micro, func(_ int, scale float32) { d.model.Backward(scale) })
	compute.End()
	if err != nil {
		return 0, fmt.Errorf("ps: %w", err)
	}
	reqs := make([]*spmd.Request, len(d.shards))
	for srv, sh := range d.shards {
		msg := wk.push[srv]
		putF64(msg, float64(loss))
		copy(f32s(msg[header:]), st.G[sh[0]:sh[1]])
		reqs[srv] = d.comm.Isend(ctx, srv, pushTag, msg)
	}
	for srv, r := range reqs {
		if _, werr := r.Wait(ctx); werr != nil {
			err = errors.Join(err, fmt.Errorf("ps: push to server %d: %w", srv, werr))
		}
	}
	if err != nil {
		return 0, err
	}
	wk.step++
	if err := d.pull(ctx); err != nil {
		return 0, err
	}
	return loss, nil
}

// pull receives every server's reply and takes its shard.
func (d *PS) pull(ctx context.Context) error {
	wk, st := d.wrk, d.model.Store()
	reqs := make([]*spmd.Request, len(d.shards))
	for srv := range d.shards {
		reqs[srv] = d.comm.Irecv(srv, replyTag, wk.reply[srv])
	}
	oldest := -1
	var err error
	for srv, r := range reqs {
		if _, werr := r.Wait(ctx); werr != nil {
			err = errors.Join(err, fmt.Errorf("ps: pull from server %d: %w", srv, werr))
			continue
		}
		sh, msg := d.shards[srv], wk.reply[srv]
		v := int(getF64(msg))
		if oldest < 0 || v < oldest {
			oldest = v
		}
		copy(st.W[sh[0]:sh[1]], f32s(msg[header:]))
	}
	if err != nil {
		return err
	}
	wk.version = oldest
	wk.maxStale = max(wk.maxStale, wk.step-oldest)
	return nil
}

// Staleness is, on a worker, the most steps by which the parameters it
// computed a gradient from were older than the step (at most the bound).
func (d *PS) Staleness() int {
	if d.wrk == nil {
		return 0
	}
	return d.wrk.maxStale
}
