package hybrid

import (
	"fmt"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Forward computes the mean next-token loss of b on a Part that is the
// whole model (First and Last), as nn.GPT.Forward does; its collectives
// run on the group under the context of the group's last Bind. A failed
// collective returns its error here; in Backward, which returns none, it
// panics with an nn.Abort that the driver recovers (nn.RecoverAbort).
func (p *Part) Forward(b *nn.Batch, train bool) (loss float32, err error) {
	if !p.First || !p.Last {
		return 0, fmt.Errorf("hybrid: blocks [%d, %d) are a pipeline chunk, not a whole model: run them through the pipeline", p.Lo, p.Hi)
	}
	if err := p.Check(b); err != nil {
		return 0, err
	}
	if err := p.G.SetTokens(b.N, b.T); err != nil {
		return 0, err
	}
	if p.model == nil {
		if p.model, err = p.acquire(-1); err != nil {
			return 0, err
		}
	}
	defer nn.RecoverAbort(&err)
	_, loss, err = p.forward(p.model, b, nil, train)
	return loss, err
}

// Backward adds the gradient of scale·loss of the last Forward.
func (p *Part) Backward(scale float32) { p.backward(p.model, nil, scale) }

// Check says whether the batch's sizes fit the model (nn.GPTConfig's
// CheckBatch).
func (p *Part) Check(b *nn.Batch) error { return p.Cfg.CheckBatch(b) }
