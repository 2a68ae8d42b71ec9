package nn

import (
	"errors"
	"fmt"
)

// GPTConfig is the shape of a GPT-2 style decoder.
type GPTConfig struct {
	Vocab   int     // token ids are in [0, Vocab)
	Context int     // the longest sequence, and the rows of wpe
	Layers  int     // transformer blocks
	Heads   int     // attention heads; they divide Dim
	Dim     int     // the residual stream's width, C
	Dropout float32 // on embeddings, residual branches and attention probabilities
}

// DefaultGPTConfig is GPT-2 small (124M parameters with a tied head, 163M
// with this package's untied one), without dropout as nanoGPT pretrains.
func DefaultGPTConfig() GPTConfig {
	return GPTConfig{Vocab: 50257, Context: 1024, Layers: 12, Heads: 12, Dim: 768}
}

// Validate reports every problem of the configuration, each wrapping
// ErrConfig, joined; nil if there is none.
func (c GPTConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, errorf(ErrConfig, format, a...)) }
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab", c.Vocab}, {"context", c.Context}, {"layers", c.Layers}, {"heads", c.Heads}, {"dim", c.Dim}} {
		if f.v <= 0 {
			bad("gpt: %s %d: pass a positive number", f.name, f.v)
		}
	}
	if c.Heads > 0 && c.Dim > 0 && c.Dim%c.Heads != 0 {
		bad("gpt: dim %d is not divisible by heads %d: pick heads that divide dim", c.Dim, c.Heads)
	}
	if c.Vocab > 1<<31-1 {
		bad("gpt: vocab %d does not fit int32 token ids", c.Vocab)
	}
	if !(c.Dropout >= 0 && c.Dropout < 1) {
		bad("gpt: dropout %v: pass a probability in [0, 1)", c.Dropout)
	}
	return errors.Join(errs...)
}

// NumParams is the number of parameters a model of the configuration has.
func (c GPTConfig) NumParams() int {
	C := c.Dim
	block := 2*C + (C*3*C + 3*C) + (C*C + C) + 2*C + (C*4*C + 4*C) + (4*C*C + C)
	return c.Vocab*C + c.Context*C + c.Layers*block + 2*C + C*c.Vocab
}

// GPT is a GPT-2 style decoder-only language model (nanoGPT's GPT):
//
//	x = Drop(wte[tokens] + wpe[0..T-1])
//	x = Block(x), Layers times
//	logits = LayerNorm_f(x)·lm_head
//
// and its loss is the mean cross-entropy of the logits against the next
// tokens at every position (a negative target is ignored).
//
// Its parameters carry nanoGPT's names (wte.weight, wpe.weight,
// h.0.ln_1.weight, h.0.attn.c_attn.weight, ..., ln_f.weight,
// lm_head.weight) in nanoGPT's order. Linear weights are stored [in, out],
// the layout of Hugging Face's GPT-2 Conv1D weights. The head is not tied
// to wte: lm_head.weight is a parameter of its own, [C, Vocab] (wte's
// transpose), initialised from N(0, 0.02) like wte, and trained apart.
// Like every Model, a GPT is used by one goroutine at a time.
type GPT struct {
	Config GPTConfig
	WTE    *Embedding // wte: [Vocab, C]
	WPE    *Embedding // wpe: [Context, C]
	Drop   *Dropout   // on the embeddings
	Blocks []*Block   // h.0, h.1, ...
	LNF    *LayerNorm // ln_f
	Head   *Linear    // lm_head: [C, Vocab], no bias

	store  *Store
	stream *Stream
	loss   CrossEntropy
	pos    []int32 // position ids 0..posT-1 for each sequence of the last batch
	posT   int
	x      *Tensor // wte[tokens] + wpe[positions]
	logits *Tensor
}

var _ Model = (*GPT)(nil)

// NewGPT builds a model of the configuration with GPT-2's initialisation
// drawn from seed: weights from N(0, 0.02), the residual projections'
// scaled by 1/√(2·Layers), biases and LayerNorm offsets zero, gains one.
// Its dropout layers draw from the stream named "dropout" with index 0
// under seed until SetDropoutStream replaces it. It fails with an error
// wrapping ErrConfig if the configuration is not valid.
func NewGPT(cfg GPTConfig, seed uint64) (*GPT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := NewBuilder()
	g := &GPT{Config: cfg, stream: NewStream(seed, "dropout", 0)}
	g.WTE = NewEmbedding(b.Scope("wte"), cfg.Vocab, cfg.Dim, Normal(gpt2Std))
	g.WPE = NewEmbedding(b.Scope("wpe"), cfg.Context, cfg.Dim, Normal(gpt2Std))
	g.Drop = NewDropout(cfg.Dropout, g.stream)
	for i := 0; i < cfg.Layers; i++ {
		g.Blocks = append(g.Blocks, NewBlock(b.Scope(fmt.Sprintf("h.%d", i)), cfg, g.stream))
	}
	g.LNF = NewLayerNorm(b.Scope("ln_f"), cfg.Dim)
	g.Head = NewLinearInit(b.Scope("lm_head"), cfg.Dim, cfg.Vocab, false, Normal(gpt2Std))
	g.store = b.Build(seed)
	names := []string{"embeddings"}
	groups := [][]*Param{{g.WTE.W, g.WPE.W}}
	for i, blk := range g.Blocks {
		blk.Ready = g.store.Ready
		names = append(names, fmt.Sprintf("h.%d", i))
		groups = append(groups, blk.Params())
	}
	names = append(names, "head")
	groups = append(groups, append(g.LNF.Params(), g.Head.Params()...))
	if err := g.store.SetUnits(names, groups); err != nil {
		panic("nn: gpt: " + err.Error()) // the layout above is fixed
	}
	return g, nil
}

// Store returns the model's parameters.
func (g *GPT) Store() *Store { return g.store }

// SetDropoutStream makes every dropout layer of the model draw from s: a
// data-parallel driver gives each rank its own index, and a resumed job
// restores the stream's state from its checkpoint.
func (g *GPT) SetDropoutStream(s *Stream) {
	g.stream = s
	g.Drop.Stream = s
	for _, blk := range g.Blocks {
		blk.setStream(s)
	}
}

// DropoutStream returns the stream the dropout layers draw from, whose
// state a checkpoint saves.
func (g *GPT) DropoutStream() *Stream { return g.stream }

// Logits returns the last Forward's logits, [N, T, Vocab]; they are the
// model's until its next Forward.
func (g *GPT) Logits() *Tensor { return g.logits }

// Forward computes the mean next-token loss of b: b.Tokens holds N
// sequences of T tokens and b.Y the N·T targets. It fails with an error
// that wraps ErrShape if the batch's sizes do not fit (T above the
// context included), and with one that wraps ErrIndex for a token or a
// target outside the vocabulary.
func (g *GPT) Forward(b *Batch, train bool) (float32, error) {
	if err := g.check(b); err != nil {
		return 0, err
	}
	st := g.store
	st.Enter(0, BeforeForward)
	tok, err := g.WTE.Forward(b.Tokens, b.N, b.T)
	if err != nil {
		st.Enter(0, AfterForward)
		return 0, fmt.Errorf("gpt: tokens: %w", err)
	}
	pos, err := g.WPE.Forward(g.positions(b.N, b.T), b.N, b.T)
	st.Enter(0, AfterForward)
	if err != nil {
		return 0, fmt.Errorf("gpt: positions: %w", err)
	}
	g.x = Resize(g.x, b.N, b.T, g.Config.Dim)
	add(g.x.Data, tok.Data, pos.Data)
	x := g.Drop.Forward(g.x, train)
	for i, blk := range g.Blocks {
		st.Enter(1+i, BeforeForward)
		x = blk.Forward(x, train)
		st.Enter(1+i, AfterForward)
	}
	head := len(g.Blocks) + 1
	st.Enter(head, BeforeForward)
	g.logits = g.Head.Forward(g.LNF.Forward(x, train), train)
	st.Enter(head, AfterForward)
	loss, err := g.loss.Forward(g.logits, b.Y)
	if err != nil {
		return 0, fmt.Errorf("gpt: targets: %w", err)
	}
	return loss, nil
}

// check says whether the batch's sizes fit the model.
func (g *GPT) check(b *Batch) error { return g.Config.CheckBatch(b) }

// CheckBatch says whether the batch's sizes fit a model of the
// configuration: N sequences of T tokens, T within the context, one
// target per token. Its errors wrap ErrShape.
func (c GPTConfig) CheckBatch(b *Batch) error {
	switch {
	case b.N <= 0 || b.T <= 0:
		return errorf(ErrShape, "gpt: batch of %d sequences of %d tokens: pass at least one token", b.N, b.T)
	case b.T > c.Context:
		return errorf(ErrShape, "gpt: sequences of %d tokens exceed the context of %d: pass at most %d", b.T, c.Context, c.Context)
	case len(b.Tokens) != b.N*b.T:
		return errorf(ErrShape, "gpt: %d tokens for %d sequences of %d: pass N·T tokens", len(b.Tokens), b.N, b.T)
	case len(b.Y) != b.N*b.T:
		return errorf(ErrShape, "gpt: %d targets for %d sequences of %d: pass one target per token", len(b.Y), b.N, b.T)
	}
	return nil
}

// positions returns the position ids of n sequences of t: 0..t-1 each.
func (g *GPT) positions(n, t int) []int32 {
	if len(g.pos) == n*t && g.posT == t {
		return g.pos
	}
	g.pos, g.posT = make([]int32, n*t), t
	for i := range g.pos {
		g.pos[i] = int32(i % t)
	}
	return g.pos
}

// Backward adds the gradient of scale·loss to the Store's gradients. It
// reports lm_head ready first, then ln_f, then each block's parameters
// from the last block to the first (see Block.Backward), and wpe and wte,
// whose gradients come from every position, last. It follows a Forward
// that succeeded.
func (g *GPT) Backward(scale float32) {
	st := g.store
	head := len(g.Blocks) + 1
	st.Enter(head, BeforeBackward)
	d := g.Head.Backward(g.loss.Backward(scale))
	st.Ready(g.Head.Params()...)
	d = g.LNF.Backward(d)
	st.Ready(g.LNF.Params()...)
	st.Enter(head, AfterBackward)
	for i := len(g.Blocks) - 1; i >= 0; i-- {
		st.Enter(1+i, BeforeBackward)
		d = g.Blocks[i].Backward(d)
		st.Enter(1+i, AfterBackward)
	}
	d = g.Drop.Backward(d)
	st.Enter(0, BeforeBackward)
	g.WPE.Backward(d)
	g.WTE.Backward(d)
	st.Ready(g.WPE.W, g.WTE.W)
	st.Enter(0, AfterBackward)
}
