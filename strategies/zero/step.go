package zero

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Forward runs the model's forward pass alone, for evaluation: at stage
// 3 it gathers each unit's parameters as it runs.
func (z *Zero) Forward(ctx context.Context, b *nn.Batch, train bool) (loss float32, err error) {
	z.ctx = ctx
	defer z.recover(&err)
	return z.model.Forward(b, train)
}

func (z *Zero) recover(err *error) {
	if v := recover(); v != nil {
		a, ok := v.(nn.Abort)
		if !ok {
			panic(v)
		}
		*err = errors.Join(a.Err, z.drain())
	}
}

// Step runs one optimizer step over this rank's micro-batches, each
// micro-batch's loss scaled by 1/len(micro) as dp.DDP.Step does, and
// returns this rank's mean loss. Afterwards every rank's parameters are
// the same update of the mean gradient over all ranks.
func (z *Zero) Step(ctx context.Context, micro []*nn.Batch) (loss float32, err error) {
	if len(micro) == 0 {
		return 0, fmt.Errorf("zero: a step needs at least one micro-batch")
	}
	defer trace.Region(ctx, "step").End()
	z.ctx, z.inStep = ctx, true
	defer func() { z.inStep = false }()
	defer z.recover(&err)
	if z.cfg.Stage < 2 && !z.cfg.Mixed {
		for _, u := range z.units {
			clear(u.g)
		}
	}
	k := float32(len(micro))
	var total float32
	for i, b := range micro {
		z.first, z.last = i == 0, i == len(micro)-1
		z.calls = [4]int{}
		fw := trace.Region(ctx, "forward")
		l, err := z.model.Forward(b, true)
		fw.End()
		if err != nil {
			return 0, errors.Join(fmt.Errorf("zero: %w", err), z.drain())
		}
		total += l
		bw := trace.Region(ctx, "backward")
		z.model.Backward(1 / k)
		bw.End()
		if err := z.checkCalls(); err != nil {
			return 0, errors.Join(err, z.drain())
		}
	}
	wait := trace.Region(ctx, "wait")
	err = z.drain()
	wait.End()
	if err != nil {
		return 0, err
	}
	if err := z.update(ctx); err != nil {
		return 0, err
	}
	return total / k, nil
}

// hook is the Store's unit hook: it gathers, frees and reduces units as
// the model's passes run them.
func (z *Zero) hook(i int, ph nn.Phase) {
	u := z.units[i]
	z.calls[ph]++
	switch ph {
	case nn.BeforeForward:
		// The next unit's gather goes into the queue behind this one's,
		// before this one is waited for.
		if z.cfg.Stage == 3 && !z.cfg.NoPrefetch && i+1 < len(z.units) {
			z.prefetch(u)
			z.prefetch(z.units[i+1])
		}
		z.materialize(u)
	case nn.AfterForward:
		z.release(u)
	case nn.BeforeBackward:
		if !z.inStep {
			panic(nn.Abort{Err: fmt.Errorf("zero: the model's Backward ran outside Step: train through Zero.Step")})
		}
		if z.cfg.Stage == 3 && !z.cfg.NoPrefetch && i > 0 {
			z.prefetch(u)
			z.prefetch(z.units[i-1])
		}
		z.materialize(u)
		switch {
		case z.cfg.Stage >= 2 && !z.cfg.Mixed:
			// Padded: the reduce-scatter runs on it in place.
			u.grad32 = z.pool.get32(z.n*u.s, true)
			u.bind(false, u.grad32)
		case z.cfg.Mixed:
			u.grad32 = z.pool.get32(u.Len(), true)
			u.bind(false, u.grad32)
		}
	case nn.AfterBackward:
		z.release(u)
		z.reduce(u)
	}
}

// checkCalls says whether the model called the unit hook around every
// unit in its forward and backward pass: a model that does not would
// train on unreduced gradients.
func (z *Zero) checkCalls() error {
	for ph, n := range z.calls {
		if n != len(z.units) {
			return fmt.Errorf("zero: the model called the unit hook %s %d times for its %d units (%s): a model must call its Store's Enter around each unit's forward and backward, as nn's models do", nn.Phase(ph), n, len(z.units), unitNames(z.units))
		}
	}
	return nil
}

func unitNames(us []*unit) string {
	names := make([]string, 0, len(us))
	for _, u := range us {
		names = append(names, u.Name)
	}
	if len(names) > 6 {
		names = append(names[:5:5], "...", names[len(names)-1])
	}
	return strings.Join(names, ", ")
}

// prefetch starts gathering u's parameters (stage 3).
func (z *Zero) prefetch(u *unit) {
	if u.gather != nil {
		return
	}
	full := z.n * u.s
	if z.cfg.Mixed {
		u.gbuf16 = z.pool.get16(full, false)
		u.gather = prims.IAllGather(z.ctx, z.shard, u.wb, u.gbuf16)
	} else {
		u.gbuf32 = z.pool.get32(full, false)
		u.gather = prims.IAllGather(z.ctx, z.shard, u.w, u.gbuf32)
	}
}

// materialize makes u's fp32 parameters readable by the layers.
func (z *Zero) materialize(u *unit) {
	if err := z.awaitUpdate(z.ctx, u); err != nil {
		panic(nn.Abort{Err: err})
	}
	if z.cfg.Stage < 3 && !z.cfg.Mixed {
		return // bound for good
	}
	src := u.wb
	if z.cfg.Stage == 3 {
		z.prefetch(u)
		r := trace.Region(z.ctx, "gather")
		err := u.gather.Wait(z.ctx)
		r.End()
		u.gather = nil
		if err != nil {
			// A failed collective may still have receives pending into
			// its buffer: it is dropped, not pooled.
			u.gbuf32, u.gbuf16 = nil, nil
			panic(nn.Abort{Err: fmt.Errorf("zero: gathering unit %s: %w", u.Name, err)})
		}
		if !z.cfg.Mixed {
			u.bind(true, u.gbuf32)
			return
		}
		src = u.gbuf16
	}
	u.compute = z.pool.get32(u.Len(), false)
	compress.DecodeBF16(u.compute, src[:u.Len()])
	if u.gbuf16 != nil {
		z.pool.put16(u.gbuf16)
		u.gbuf16 = nil
	}
	u.bind(true, u.compute)
}

// release frees u's temporary parameters.
func (z *Zero) release(u *unit) {
	if z.cfg.Stage < 3 && !z.cfg.Mixed {
		return
	}
	u.bind(true, nil)
	z.pool.put32(u.gbuf32)
	z.pool.put32(u.compute)
	u.gbuf32, u.compute = nil, nil
}
