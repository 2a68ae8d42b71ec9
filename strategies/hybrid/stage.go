package hybrid

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

var _ pipe.Stage = (*Engine)(nil)

// part returns the rank's part that holds chunk.
func (e *Engine) part(chunk int) (*Part, error) {
	k := chunk / e.cfg.PP
	if chunk%e.cfg.PP != e.mesh.P || k >= len(e.parts) {
		return nil, fmt.Errorf("chunk %d is not on pipeline stage %d", chunk, e.mesh.P)
	}
	return e.parts[k], nil
}

// Forward runs micro-batch mb through chunk (pipe.Stage).
func (e *Engine) Forward(ctx context.Context, chunk, mb int, in []float32) (out []float32, err error) {
	p, err := e.part(chunk)
	if err != nil {
		return nil, err
	}
	s, err := p.acquire(mb)
	if err != nil {
		return nil, err
	}
	var x *nn.Tensor
	if !p.First {
		x = nn.FromData(in, e.group.LocalShape(e.cfg.Model.Dim)...)
	}
	defer nn.RecoverAbort(&err)
	y, loss, err := p.forward(s, e.micro[mb], x, true)
	if err != nil {
		return nil, err
	}
	if p.Last {
		e.loss += loss
		return nil, nil
	}
	return y.Data, nil
}

// Backward runs micro-batch mb backwards through chunk (pipe.Stage); each
// micro-batch's loss counts 1/Micro of the step's.
func (e *Engine) Backward(ctx context.Context, chunk, mb int, dout []float32) (din []float32, err error) {
	p, err := e.part(chunk)
	if err != nil {
		return nil, err
	}
	s, err := p.acquire(mb)
	if err != nil {
		return nil, err
	}
	var dy *nn.Tensor
	if !p.Last {
		dy = nn.FromData(dout, e.group.LocalShape(e.cfg.Model.Dim)...)
	}
	defer nn.RecoverAbort(&err)
	d := p.backward(s, dy, 1/float32(e.cfg.Micro))
	p.release(mb)
	if p.First {
		return nil, nil
	}
	return d.Data, nil
}
