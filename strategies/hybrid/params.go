package hybrid

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Params returns the whole model's parameters in nn.GPT's flat layout
// (nn.NewGPT(cfg, seed).Store().W's order and shapes), pasted together
// from every rank's parts, on every rank: for tests, evaluation and
// single-file checkpoints. Every rank calls it; it allocates and
// all-reduces the whole model.
func (e *Engine) Params(ctx context.Context) ([]float32, error) {
	ref, err := nn.NewGPT(e.cfg.Model, 0)
	if err != nil {
		return nil, err
	}
	full := ref.Store().W
	clear(full)
	var local [][]float32
	for _, p := range e.parts {
		local = append(local, p.Store().W)
	}
	if e.zero != nil {
		w, err := e.zero.Params(ctx)
		if err != nil {
			return nil, err
		}
		local[0] = w
	}
	if e.mesh.D == 0 {
		for i, p := range e.parts {
			for _, s := range p.Shards() {
				if s.Dim < 0 && e.mesh.T != 0 {
					continue // replicated: tensor-parallel rank 0 gives it
				}
				dst := ref.Store().Param(s.Param.Name)
				if dst == nil {
					return nil, fmt.Errorf("hybrid: parameter %s is not in the model", s.Param.Name)
				}
				s.Paste(dst.W, local[i][s.Param.Offset:s.Param.End()])
			}
		}
	}
	if err := prims.AllReduce(ctx, e.mesh.World, full, prims.Sum[float32]()); err != nil {
		return nil, fmt.Errorf("hybrid: gathering the parameters: %w", err)
	}
	return full, nil
}
