package nn

import "fmt"

// Batch is one batch of examples: features X (N rows of XDim) for
// classifiers, or Tokens (N sequences of T) for language models, and
// their targets Y (one per row, or one per token).
type Batch struct {
	N      int
	X      []float32
	XDim   int
	Tokens []int32
	T      int
	Y      []int32
	// First is the index of the batch's first row or sequence in the
	// step's whole batch, where this one is a part of it (a micro-batch,
	// a data-parallel replica's share): row-keyed dropout (strategies/tp)
	// masks the whole batch's rows. 0 for a whole batch.
	First int
}

// Model is what the training drivers run: a network whose parameters live
// in one Store. Forward computes the mean loss of a batch and keeps what
// Backward needs; Backward adds the gradient of scale·loss to the Store's
// gradients (it accumulates: drivers zero them) and reports each
// parameter ready through the Store as soon as its gradient is complete.
// A Model is used by one goroutine at a time.
type Model interface {
	Store() *Store
	Forward(b *Batch, train bool) (float32, error)
	Backward(scale float32)
}

// Layer is one step of a network, with a hand-written backward pass.
// Forward's result and Backward's belong to the layer until its next call.
type Layer interface {
	Forward(x *Tensor, train bool) *Tensor
	Backward(dy *Tensor) *Tensor
	Params() []*Param
}

// Sequential is a classifier: layers applied in turn to a batch's
// features, then softmax cross-entropy against its targets.
type Sequential struct {
	Layers []Layer
	store  *Store
	loss   CrossEntropy
	in     Tensor
	unit   []int // per layer, its unit in the Store, or -1 for a layer without parameters
	whole  bool  // the layers' parameters do not tile the Store: one unit runs around them all
}

// NewSequential wraps layers whose parameters are all in store. Layers
// that can report their own parameters ready (Linear) are told to. Each
// layer with parameters is a unit of the store when the layers' parameters
// tile it in order (NewMLP's do); otherwise the whole model is one unit.
func NewSequential(store *Store, layers ...Layer) *Sequential {
	s := &Sequential{Layers: layers, store: store, unit: make([]int, len(layers))}
	var names []string
	var groups [][]*Param
	for i, l := range layers {
		if r, ok := l.(reporter); ok {
			r.ReportTo(store)
		}
		s.unit[i] = -1
		if ps := l.Params(); len(ps) > 0 {
			s.unit[i] = len(groups)
			names = append(names, fmt.Sprintf("layer %d", i))
			groups = append(groups, ps)
		}
	}
	if store.SetUnits(names, groups) != nil {
		s.whole = true
	}
	return s
}

// enter calls the unit hook for layer i.
func (s *Sequential) enter(i int, ph Phase) {
	if u := s.unit[i]; u >= 0 && !s.whole {
		s.store.Enter(u, ph)
	}
}

// reporter is a layer that reports its parameters ready during its
// Backward, as it finishes each.
type reporter interface {
	ReportTo(st *Store)
}

// inputWidth is a layer that takes a fixed number of features per row
// (Linear): Sequential checks a batch against its first layer's, where
// a width that does not fit would fail inside the product or, wider,
// read the rows askew.
type inputWidth interface{ inputWidth() int }

// Store returns the model's parameters.
func (s *Sequential) Store() *Store { return s.store }

// Forward runs the layers and returns the mean cross-entropy.
func (s *Sequential) Forward(b *Batch, train bool) (float32, error) {
	if b.XDim <= 0 || len(b.X) != b.N*b.XDim {
		return 0, errorf(ErrShape, "sequential: batch of %d rows has %d features for dimension %d: pass N·XDim features", b.N, len(b.X), b.XDim)
	}
	if len(s.Layers) > 0 {
		if w, ok := s.Layers[0].(inputWidth); ok && w.inputWidth() != b.XDim {
			return 0, errorf(ErrShape, "sequential: batch of %d features per row for a first layer of %d inputs: pass XDim %d", b.XDim, w.inputWidth(), w.inputWidth())
		}
	}
	s.in = Tensor{Shape: []int{b.N, b.XDim}, Data: b.X}
	x := &s.in
	if s.whole {
		s.store.Enter(0, BeforeForward)
	}
	for i, l := range s.Layers {
		s.enter(i, BeforeForward)
		x = l.Forward(x, train)
		s.enter(i, AfterForward)
	}
	if s.whole {
		s.store.Enter(0, AfterForward)
	}
	return s.loss.Forward(x, b.Y)
}

// Backward runs the layers backwards, the last first, reporting each
// layer's parameters ready as soon as it is done.
func (s *Sequential) Backward(scale float32) {
	dy := s.loss.Backward(scale)
	if s.whole {
		s.store.Enter(0, BeforeBackward)
	}
	for i := len(s.Layers) - 1; i >= 0; i-- {
		l := s.Layers[i]
		s.enter(i, BeforeBackward)
		if i == 0 {
			dy = backwardNoInput(l, dy)
		} else {
			dy = l.Backward(dy)
		}
		if _, ok := l.(reporter); !ok {
			s.store.Ready(l.Params()...)
		}
		s.enter(i, AfterBackward)
	}
	if s.whole {
		s.store.Enter(0, AfterBackward)
	}
}

// inputless is a layer that can skip computing its input's gradient,
// which the first layer of a network never needs.
type inputless interface {
	BackwardParams(dy *Tensor)
}

func backwardNoInput(l Layer, dy *Tensor) *Tensor {
	if p, ok := l.(inputless); ok {
		p.BackwardParams(dy)
		return nil
	}
	return l.Backward(dy)
}

// NewMLP builds a multilayer perceptron with ReLU between its Linear
// layers: sizes[0] inputs, sizes[len-1] classes. Its parameters are named
// fc1.weight, fc1.bias, fc2.weight, ...
func NewMLP(seed uint64, sizes ...int) *Sequential {
	b := NewBuilder()
	var layers []Layer
	for i := 0; i+1 < len(sizes); i++ {
		if i > 0 {
			layers = append(layers, &ReLU{})
		}
		layers = append(layers, NewLinear(b.Scope(fmt.Sprintf("fc%d", i+1)), sizes[i], sizes[i+1], true))
	}
	return NewSequential(b.Build(seed), layers...)
}

// Accumulate runs one step's forward and backward passes over
// micro-batches: it zeroes the gradients, then for each micro-batch runs
// Forward and calls backward(i, scale) with scale 1/len(micro), so that k
// micro-batches of b examples accumulate the gradient of one batch of
// k·b. backward is the model's Backward, or a driver's wrapper of it. It
// returns the mean of the micro-batches' losses.
func Accumulate(m Model, micro []*Batch, backward func(i int, scale float32)) (float32, error) {
	if len(micro) == 0 {
		return 0, fmt.Errorf("a step needs at least one micro-batch")
	}
	m.Store().ZeroGrads()
	k := float32(len(micro))
	var total float32
	for i, b := range micro {
		loss, err := m.Forward(b, true)
		if err != nil {
			return 0, err
		}
		total += loss
		backward(i, 1/k)
	}
	return total / k, nil
}
