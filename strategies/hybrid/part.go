package hybrid

import (
	"fmt"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// Part is one chunk of the parallel GPT, what a pipeline stage (or one of
// its virtual stages) runs: blocks [Lo, Hi) of the model, with the
// embeddings if First and ln_f, the head and the loss if Last, each
// layer split over the tensor-parallel group. Its parameters carry
// nn.GPT's names and, pasted together (Shards), equal nn.NewGPT's at the
// same seed. A Part that is both First and Last is the whole model and an
// nn.Model, which a data-parallel driver (dp, zero) can run.
//
// The layers keep what their backward needs, so a Part keeps a copy of
// its layers, sharing its parameters, for each micro-batch in flight
// (a slot); Peak says how many it needed at once and how large they grew.
type Part struct {
	Cfg         nn.GPTConfig
	G           *tp.Group
	Lo, Hi      int
	First, Last bool

	rng    *tp.RNG
	store  *nn.Store
	shards []tp.Shard
	all    []*slot // every slot built
	free   []*slot
	busy   map[int]*slot // by micro-batch
	peak   int           // most in use at once
	model  *slot         // the slot of the nn.Model methods
}

var _ nn.Model = (*Part)(nil)

// slot is one copy of a Part's layers.
type slot struct {
	wte    *tp.Embedding
	wpe    *nn.Embedding
	drop   *tp.Dropout
	blocks []*tp.Block
	lnf    *nn.LayerNorm
	head   *tp.ColumnLinear
	loss   *tp.CrossEntropy

	x       *nn.Tensor
	pos     []int32
	targets []int32
	saved   []float32
}

// NewPart builds the chunk of blocks [lo, hi) of a model of cfg on the
// group g, drawing its initial weights from seed and its dropout masks
// from rng. cfg must be valid and its heads divide by g's size.
func NewPart(cfg nn.GPTConfig, g *tp.Group, rng *tp.RNG, seed uint64, lo, hi int, first, last bool) (*Part, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if lo < 0 || hi > cfg.Layers || lo > hi || (lo == hi && !first && !last) {
		return nil, fmt.Errorf("hybrid: blocks [%d, %d) of a model of %d: pass a range of its blocks", lo, hi, cfg.Layers)
	}
	p := &Part{Cfg: cfg, G: g, Lo: lo, Hi: hi, First: first, Last: last, rng: rng, busy: map[int]*slot{}}
	b := nn.NewBuilder()
	s, err := p.build(b)
	if err != nil {
		return nil, err
	}
	p.store = b.Build(seed)
	p.all, p.free = []*slot{s}, []*slot{s}
	p.shards = s.shards()
	var names []string
	var groups [][]*nn.Param
	if first {
		names, groups = append(names, "embeddings"), append(groups, []*nn.Param{s.wte.W, s.wpe.W})
	}
	for i, blk := range s.blocks {
		names, groups = append(names, fmt.Sprintf("h.%d", lo+i)), append(groups, blk.Params())
	}
	if last {
		names = append(names, "head")
		groups = append(groups, append(s.lnf.Params(), s.head.Params()...))
	}
	if err := p.store.SetUnits(names, groups); err != nil {
		return nil, fmt.Errorf("hybrid: %w", err)
	}
	return p, nil
}

// build declares (or, with a reusing builder, finds) the chunk's layers
// in nn.GPT's order.
func (p *Part) build(b *nn.Builder) (*slot, error) {
	cfg, g := p.Cfg, p.G
	s := &slot{}
	init := nn.Normal(0.02)
	if p.First {
		s.wte = tp.NewEmbedding(b.Scope("wte"), g, cfg.Vocab, cfg.Dim, init)
		s.wpe = nn.NewEmbedding(b.Scope("wpe"), cfg.Context, cfg.Dim, init)
		s.drop = &tp.Dropout{P: cfg.Dropout, Stream: p.rng.Stream("dropout/embeddings"), Key: p.rng.Key("dropout/embeddings"), Row: g.TokenRow}
	}
	for i := p.Lo; i < p.Hi; i++ {
		name := fmt.Sprintf("h.%d", i)
		blk, err := tp.NewBlock(b.Scope(name), g, cfg, p.rng, name)
		if err != nil {
			return nil, err
		}
		s.blocks = append(s.blocks, blk)
	}
	if p.Last {
		s.lnf = nn.NewLayerNorm(b.Scope("ln_f"), cfg.Dim)
		lo, hi := g.Part(cfg.Vocab)
		s.head = tp.NewColumnLinear(b.Scope("lm_head"), g, cfg.Dim, cfg.Vocab, false, init, []tp.Range{{Lo: lo, Hi: hi}})
		s.loss = tp.NewCrossEntropy(g, cfg.Vocab)
	}
	return s, nil
}

// shards lists how each parameter of the chunk is cut.
func (s *slot) shards() []tp.Shard {
	var out []tp.Shard
	whole := func(ps ...*nn.Param) {
		for _, p := range ps {
			out = append(out, tp.Shard{Param: p, Full: p.Shape, Dim: -1})
		}
	}
	if s.wte != nil {
		out = append(out, s.wte.Shards()...)
		whole(s.wpe.W)
	}
	for _, b := range s.blocks {
		out = append(out, b.Shards()...)
	}
	if s.lnf != nil {
		whole(s.lnf.Params()...)
		out = append(out, s.head.Shards()...)
	}
	return out
}

// Store returns the chunk's parameters.
func (p *Part) Store() *nn.Store { return p.store }

// Shards says which part of the whole model's parameter each of the
// chunk's is, in layout order.
func (p *Part) Shards() []tp.Shard { return p.shards }

// Peak returns the most slots the chunk had in use at once and how many
// it built.
func (p *Part) Peak() (inUse, built int) { return p.peak, len(p.all) }

// acquire returns the slot of micro-batch mb, taking a free one (or
// building one) at its forward.
func (p *Part) acquire(mb int) (*slot, error) {
	if s, ok := p.busy[mb]; ok {
		return s, nil
	}
	var s *slot
	if n := len(p.free); n > 0 {
		s, p.free = p.free[n-1], p.free[:n-1]
	} else {
		var err error
		if s, err = p.build(nn.Reuse(p.store)); err != nil {
			return nil, err
		}
		p.all = append(p.all, s)
	}
	p.busy[mb] = s
	p.peak = max(p.peak, len(p.busy))
	return s, nil
}

// release returns micro-batch mb's slot after its backward.
func (p *Part) release(mb int) {
	if s, ok := p.busy[mb]; ok {
		delete(p.busy, mb)
		p.free = append(p.free, s)
	}
}

// unit is the index in the Store's units of the chunk's unit i, counted
// from the embeddings (-1), then the blocks (0..), then the head.
func (p *Part) unit(i int) int {
	if p.First {
		return i + 1
	}
	return i
}
