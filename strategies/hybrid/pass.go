package hybrid

import (
	"fmt"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// forward runs micro-batch b through slot s: from b's tokens on the first
// chunk, else from in, the previous chunk's output (this rank's token
// rows with sequence parallelism, else [N, T, C]). It returns the
// chunk's output, or, on the last chunk, nil and the loss.
func (p *Part) forward(s *slot, b *nn.Batch, in *nn.Tensor, train bool) (*nn.Tensor, float32, error) {
	st := p.store
	p.G.SetFirst(b.First)
	x := in
	if p.First {
		st.Enter(0, nn.BeforeForward)
		tok, err := s.wte.Forward(b.Tokens, b.N, b.T)
		if err != nil {
			st.Enter(0, nn.AfterForward)
			return nil, 0, fmt.Errorf("gpt: tokens: %w", err)
		}
		pos, err := s.wpe.Forward(p.positions(s, tok.Rows()), tok.Rows())
		st.Enter(0, nn.AfterForward)
		if err != nil {
			return nil, 0, fmt.Errorf("gpt: positions: %w", err)
		}
		s.x = nn.Resize(s.x, tok.Shape...)
		for i := range s.x.Data {
			s.x.Data[i] = tok.Data[i] + pos.Data[i]
		}
		x = s.drop.Forward(s.x, train)
	}
	for i, blk := range s.blocks {
		st.Enter(p.unit(i), nn.BeforeForward)
		x = blk.Forward(x, train)
		st.Enter(p.unit(i), nn.AfterForward)
	}
	if !p.Last {
		return x, 0, nil
	}
	u := p.unit(len(s.blocks))
	st.Enter(u, nn.BeforeForward)
	logits := s.head.Forward(s.lnf.Forward(x, train), train)
	st.Enter(u, nn.AfterForward)
	s.targets = b.Y
	loss, err := s.loss.Forward(logits, b.Y)
	if err != nil {
		return nil, 0, fmt.Errorf("gpt: targets: %w", err)
	}
	return nil, loss, nil
}

// positions returns the position of each of this rank's token rows.
func (p *Part) positions(s *slot, rows int) []int32 {
	if len(s.pos) != rows {
		s.pos = make([]int32, rows)
	}
	_, t := p.G.Tokens()
	for r := range s.pos {
		s.pos[r] = int32(p.G.TokenRow(r) % t)
	}
	return s.pos
}

// backward adds slot s's gradients: of scale·loss on the last chunk, else
// from dout, the gradient of the chunk's output. It returns the gradient
// of the chunk's input, nil on the first chunk.
func (p *Part) backward(s *slot, dout *nn.Tensor, scale float32) *nn.Tensor {
	st := p.store
	d := dout
	if p.Last {
		u := p.unit(len(s.blocks))
		st.Enter(u, nn.BeforeBackward)
		sum := p.sumPartial(s, s.lnf.Params())
		d = s.lnf.Backward(s.head.Backward(s.loss.Backward(scale)))
		sum()
		st.Ready(s.head.Params()...)
		st.Ready(s.lnf.Params()...)
		st.Enter(u, nn.AfterBackward)
	}
	for i := len(s.blocks) - 1; i >= 0; i-- {
		st.Enter(p.unit(i), nn.BeforeBackward)
		d = s.blocks[i].Backward(d)
		st.Ready(s.blocks[i].Params()...)
		st.Enter(p.unit(i), nn.AfterBackward)
	}
	if !p.First {
		return d
	}
	d = s.drop.Backward(d)
	st.Enter(0, nn.BeforeBackward)
	sum := p.sumPartial(s, []*nn.Param{s.wpe.W})
	s.wpe.Backward(d)
	sum()
	s.wte.Backward(d)
	st.Ready(s.wpe.W, s.wte.W)
	st.Enter(0, nn.AfterBackward)
	return nil
}

// sumPartial sums over the group the gradients that each rank computes a
// part of with sequence parallelism (ln_f's, wpe's), as tp.Block does
// for its own.
func (p *Part) sumPartial(s *slot, ps []*nn.Param) func() {
	if !p.G.SeqParallel {
		return func() {}
	}
	return tp.SumPartial(p.G, ps, &s.saved)
}
