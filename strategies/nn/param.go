package nn

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Param is one named parameter tensor of a model: W and G are its views
// into the model's flat parameter and gradient buffers, at Offset.
type Param struct {
	Name   string
	Shape  []int
	Offset int // first element in the flat buffers
	W, G   []float32
	// Decay says whether weight decay applies: matrices yes; biases,
	// LayerNorm gains and offsets no (as in GPT-2 and nanoGPT).
	Decay bool

	init Init
}

// Len is the number of elements.
func (p *Param) Len() int { return numel(p.Shape) }

// End is one past the last element in the flat buffers.
func (p *Param) End() int { return p.Offset + p.Len() }

// Init fills a new parameter from a random stream of its own.
type Init func(w []float32, r *Stream)

// Zeros leaves a parameter at zero.
func Zeros() Init { return func([]float32, *Stream) {} }

// Ones sets a parameter to one (LayerNorm's gain).
func Ones() Init {
	return func(w []float32, _ *Stream) {
		for i := range w {
			w[i] = 1
		}
	}
}

// Normal draws from N(0, std²) (GPT-2's weights, std 0.02).
func Normal(std float64) Init {
	return func(w []float32, r *Stream) {
		for i := range w {
			w[i] = float32(r.NormFloat64() * std)
		}
	}
}

// Uniform draws from U(-bound, bound): PyTorch's Linear draws its weight
// and bias with bound 1/sqrt(fan_in).
func Uniform(bound float64) Init {
	return func(w []float32, r *Stream) {
		for i := range w {
			w[i] = float32((2*r.Float64() - 1) * bound)
		}
	}
}

// FanIn is Uniform(1/sqrt(fanIn)).
func FanIn(fanIn int) Init { return Uniform(1 / math.Sqrt(float64(fanIn))) }

// Builder declares a model's parameters before its buffers exist. Layers
// take one at construction and ask it for their parameters; Build then
// lays them out in declaration order in one buffer. A Builder is not safe
// for concurrent use.
type Builder struct {
	prefix string
	decl   *[]*Param
	names  map[string]bool
	reuse  *Store // set by Reuse: Param returns its parameters
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder {
	return &Builder{decl: new([]*Param), names: map[string]bool{}}
}

// Scope returns a builder whose parameters' names start with name and a
// dot; it declares into the same model.
func (b *Builder) Scope(name string) *Builder {
	return &Builder{prefix: b.prefix + name + ".", decl: b.decl, names: b.names, reuse: b.reuse}
}

// Reuse returns a builder whose Param returns the store's parameter of
// the name asked for instead of declaring a new one: layers built with
// it share the store's parameters (their W and G) and keep activations
// of their own. A pipeline stage runs several micro-batches through one
// chunk of a model that way, one such copy per micro-batch in flight.
// Param panics if the store has no parameter of the name or one of
// another shape: the layers must be built as the store's were.
func Reuse(s *Store) *Builder {
	return &Builder{decl: new([]*Param), names: map[string]bool{}, reuse: s}
}

// Param declares a parameter. Its views are set by Build.
func (b *Builder) Param(name string, init Init, decay bool, shape ...int) *Param {
	full := b.prefix + name
	if b.reuse != nil {
		p := b.reuse.Param(full)
		if p == nil || !slices.Equal(p.Shape, shape) {
			panic(fmt.Sprintf("nn: reusing parameter %q of shape %v: the store has none of that name and shape", full, shape))
		}
		return p
	}
	if b.names[full] {
		panic(fmt.Sprintf("nn: parameter %q declared twice", full))
	}
	b.names[full] = true
	p := &Param{Name: full, Shape: append([]int(nil), shape...), Decay: decay, init: init}
	*b.decl = append(*b.decl, p)
	return p
}

// Build allocates the flat buffers, points every parameter's views into
// them and initialises each parameter from the stream named "init/" and
// its name: a parameter's first values depend on the seed and its name
// only, not on which other parameters exist.
func (b *Builder) Build(seed uint64) *Store {
	ps := *b.decl
	n := 0
	for _, p := range ps {
		p.Offset = n
		n += p.Len()
	}
	s := &Store{W: make([]float32, n), G: make([]float32, n), Params: ps}
	s.Units = []Unit{{Name: "model", Lo: 0, Hi: n, Params: ps}}
	for _, p := range ps {
		p.W, p.G = s.W[p.Offset:p.End():p.End()], s.G[p.Offset:p.End():p.End()]
		if p.init != nil {
			p.init(p.W, NewStream(seed, "init/"+p.Name, 0))
		}
	}
	return s
}

// Store is a model's two flat buffers and the parameters that are views
// into them. The ready hooks are called from the goroutine that runs
// Backward.
type Store struct {
	W, G   []float32
	Params []*Param
	// Units are the groups of parameters the model runs together, in
	// forward order (see Unit). A model with no units of its own has one.
	Units  []Unit
	ready  func(*Param)
	ranges func(lo, hi int)
	unit   func(u int, ph Phase)
}

// OnReadyRange sets the function that Backward calls for each range
// [lo, hi) of the flat gradient buffer it has finished: a whole parameter,
// or a part of one from a layer that reports as it goes (Linear does,
// row block by row block, when someone listens); nil removes it. The
// ranges of one Backward cover each parameter once.
func (s *Store) OnReadyRange(f func(lo, hi int)) { s.ranges = f }

// Parts says whether anyone listens for ranges: a layer cuts its
// gradient's computation into parts only then.
func (s *Store) Parts() bool { return s.ranges != nil }

// ReadyPart reports elements [lo, hi) of p's gradient finished. A layer
// that reports a parameter by parts reports them from its end down to
// element 0, the order in which a data-parallel driver reduces the flat
// buffer (from the top down); the part that reaches element 0 completes
// the parameter for OnReady.
func (s *Store) ReadyPart(p *Param, lo, hi int) {
	if s.ranges != nil {
		s.ranges(p.Offset+lo, p.Offset+hi)
	}
	if lo == 0 && s.ready != nil {
		s.ready(p)
	}
}

// OnReady sets the function that Backward calls for each parameter whose
// gradient it has finished, in the order it finishes them; nil removes it.
func (s *Store) OnReady(f func(*Param)) { s.ready = f }

// Ready reports ps as finished. Models call it from Backward. Parameters
// finished together are reported from the one highest in the buffer down,
// the order in which a data-parallel driver reduces it.
func (s *Store) Ready(ps ...*Param) {
	up := func(a, b *Param) int { return a.Offset - b.Offset }
	if len(ps) > 1 && !slices.IsSortedFunc(ps, up) {
		// Neither layout order (a layer's Params) nor its reverse: sort
		// a copy. Layout order, the common case, is walked backwards.
		ps = slices.Clone(ps)
		slices.SortFunc(ps, up)
	}
	for i := len(ps) - 1; i >= 0; i-- {
		s.ReadyPart(ps[i], 0, ps[i].Len())
	}
}

// ZeroGrads sets every gradient to zero; Backward accumulates.
func (s *Store) ZeroGrads() { clear(s.G) }

// Param returns the parameter of that name, or nil.
func (s *Store) Param(name string) *Param {
	for _, p := range s.Params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Names lists the parameters' names, in layout order, for messages.
func (s *Store) Names() string {
	names := make([]string, len(s.Params))
	for i, p := range s.Params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
