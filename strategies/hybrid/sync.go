package hybrid

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// dpSync is the data-parallel side of a pipeline: after the schedule has
// run every micro-batch, each chunk's gradients are averaged over the
// data-parallel group and the optimizer steps. ZeRO stage 0 all-reduces
// them and every replica updates the whole chunk; stage 1 reduce-scatters
// them, each replica updates its block of the chunk (and keeps optimizer
// state for that block only), and an all-gather brings the updated
// parameters back to every replica.
type dpSync struct {
	c     *spmd.Comm
	stage int
	parts []*Part
	opts  []nn.Optimizer
	lo    []int // per part, the block this replica updates
	hi    []int
	pad   []float32
	codec compress.Codec // compresses the gradients' reductions, when set
	stats compress.Stats
}

func newSync(ctx context.Context, dp *spmd.Comm, parts []*Part, cfg Config) (*dpSync, error) {
	c, err := dp.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("hybrid: data-parallel group: %w", err)
	}
	s := &dpSync{c: c, stage: cfg.Zero, parts: parts, codec: cfg.Compress}
	for _, p := range parts {
		n := len(p.Store().W)
		lo, hi := 0, n
		if s.stage == 1 {
			lo, hi = prims.Block(n, c.Size(), c.Rank())
		}
		opt, err := cfg.Optimizer(p.Store().Params, lo, hi)
		if err != nil {
			c.Free()
			return nil, fmt.Errorf("hybrid: optimizer of blocks [%d, %d): %w", p.Lo, p.Hi, err)
		}
		s.opts, s.lo, s.hi = append(s.opts, opt), append(s.lo, lo), append(s.hi, hi)
	}
	return s, nil
}

// step averages the gradients and updates the parameters.
func (s *dpSync) step(ctx context.Context) error {
	defer trace.Region(ctx, "optimizer").End()
	d := float32(s.c.Size())
	for i, p := range s.parts {
		st := p.Store()
		lo, hi := s.lo[i], s.hi[i]
		if s.c.Size() > 1 {
			var err error
			var cs compress.Stats
			rs, scatters := s.codec.(compress.ReduceScatterer)
			switch {
			case s.stage == 1 && s.codec == nil:
				err = prims.ReduceScatter(ctx, s.c, st.G, st.G[lo:hi], prims.Sum[float32]())
			case s.stage == 1 && scatters:
				cs, err = rs.ReduceScatter(ctx, s.c, i, st.G, st.G[lo:hi], dp.Segments(st.Params, 0, len(st.G)))
			case s.codec != nil:
				// At stage 1 a codec that cannot reduce-scatter all-reduces
				// and the replica keeps its block.
				cs, err = s.codec.AllReduce(ctx, s.c, i, st.G, dp.Segments(st.Params, 0, len(st.G)))
			default:
				err = prims.AllReduce(ctx, s.c, st.G, prims.Sum[float32]())
			}
			s.stats.Add(cs)
			if err != nil {
				return fmt.Errorf("hybrid: averaging the gradients of blocks [%d, %d) over the data-parallel group: %w", p.Lo, p.Hi, err)
			}
			for j := range st.G[lo:hi] {
				st.G[lo+j] /= d
			}
		}
		s.opts[i].Step(st.W[lo:hi], st.G[lo:hi])
		if s.stage == 1 && s.c.Size() > 1 {
			if err := s.gather(ctx, st.W); err != nil {
				return fmt.Errorf("hybrid: gathering the parameters of blocks [%d, %d): %w", p.Lo, p.Hi, err)
			}
		}
	}
	return nil
}

// gather all-gathers every replica's block of w, through a buffer of
// equal blocks (the last ones one element shorter are padded).
func (s *dpSync) gather(ctx context.Context, w []float32) error {
	n, size := len(w), s.c.Size()
	k := (n + size - 1) / size
	if cap(s.pad) < k*size {
		s.pad = make([]float32, k*size)
	}
	pad := s.pad[:k*size]
	me := s.c.Rank()
	lo, hi := prims.Block(n, size, me)
	copy(pad[me*k:], w[lo:hi])
	if err := prims.AllGather(ctx, s.c, pad[me*k:(me+1)*k], pad); err != nil {
		return err
	}
	for r := 0; r < size; r++ {
		lo, hi := prims.Block(n, size, r)
		copy(w[lo:hi], pad[r*k:])
	}
	return nil
}

func (s *dpSync) close() error { return s.c.Free() }
