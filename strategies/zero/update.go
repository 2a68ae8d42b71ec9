package zero

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// update runs each chunk's optimizer on the mean gradient and brings the
// parameters of stages 0-2 up to date on every rank.
func (z *Zero) update(ctx context.Context) error {
	defer trace.Region(ctx, "optimizer").End()
	scale := 1 / float32(z.world)
	var g32 []float32
	for _, u := range z.units {
		if u.opt == nil {
			continue
		}
		m := u.chunkLen()
		w := z.chunk(u)
		var g []float32
		switch {
		case !z.cfg.Mixed && z.cfg.Stage < 2:
			g = u.g[z.r*u.s : z.r*u.s+m]
		case !z.cfg.Mixed:
			g = u.g[:m]
		}
		if z.cfg.Mixed {
			g32 = grow(g32, m)
			gb := u.gb[:m]
			if z.cfg.Stage < 2 {
				gb = u.gb[z.r*u.s : z.r*u.s+m]
			}
			for i, h := range gb {
				g32[i] = compress.FromBF16(h) * scale
			}
			g = g32
		} else if z.world > 1 {
			for i := range g {
				g[i] *= scale
			}
		}
		u.opt.Step(w, g)
		if z.cfg.Mixed {
			if z.cfg.Stage < 3 {
				compress.EncodeBF16(u.wb[z.r*u.s:z.r*u.s+m], w)
			} else {
				compress.EncodeBF16(u.wb[:m], w)
			}
		}
	}
	z.gatherUnits(ctx)
	return nil
}

// gatherUnits brings the whole units of stages 1 and 2 up to date on
// every rank of the shard group, each from its chunk's owner. The gathers
// run in the background: each unit's is waited for when the unit next
// runs (materialize), so that they overlap the next step's forward pass,
// or by settle.
func (z *Zero) gatherUnits(ctx context.Context) {
	if z.cfg.Stage == 3 || z.n == 1 {
		return
	}
	for _, u := range z.units {
		lo, hi := z.r*u.s, (z.r+1)*u.s
		if z.cfg.Mixed {
			u.updated = prims.IAllGather(ctx, z.shard, u.wb[lo:hi], u.wb)
		} else {
			u.updated = prims.IAllGather(ctx, z.shard, u.w[lo:hi], u.w)
		}
	}
}

// awaitUpdate waits for u's gather after the last update, if any.
func (z *Zero) awaitUpdate(ctx context.Context, u *unit) error {
	if u.updated == nil {
		return nil
	}
	err := u.updated.Wait(ctx)
	u.updated = nil
	if err != nil {
		return fmt.Errorf("zero: gathering the updated unit %s: %w", u.Name, err)
	}
	return nil
}

// settle waits for every unit's gather after the last update: then every
// rank holds the same whole parameters (stages 0-2).
func (z *Zero) settle(ctx context.Context) error {
	var err error
	for _, u := range z.units {
		if e := z.awaitUpdate(ctx, u); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// Params returns the model's whole fp32 parameters (the master copy in
// mixed precision), in the flat layout, on every rank: for evaluation,
// tests and single-file checkpoints. Every rank of the driver calls it.
func (z *Zero) Params(ctx context.Context) ([]float32, error) {
	if err := z.settle(ctx); err != nil {
		return nil, err
	}
	total := 0
	for _, u := range z.units {
		total = max(total, u.Hi)
	}
	out := make([]float32, total)
	for _, u := range z.units {
		chunk := make([]float32, u.s)
		copy(chunk, z.chunk(u))
		all := make([]float32, z.n*u.s)
		if err := prims.AllGather(ctx, z.shard, chunk, all); err != nil {
			return nil, fmt.Errorf("zero: gathering unit %s: %w", u.Name, err)
		}
		copy(out[u.Lo:u.Hi], all)
	}
	return out, nil
}

// chunk is this rank's fp32 parameters of u's chunk: the master copy, or
// the parameters themselves.
func (z *Zero) chunk(u *unit) []float32 {
	m := u.chunkLen()
	switch {
	case z.cfg.Mixed:
		return u.master
	case z.cfg.Stage < 3:
		return u.w[z.r*u.s : z.r*u.s+m]
	default:
		return u.w[:m]
	}
}
