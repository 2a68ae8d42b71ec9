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
}

// NewSequential wraps layers whose parameters are all in store. Layers
// that can report their own parameters ready (Linear) are told to.
func NewSequential(store *Store, layers ...Layer) *Sequential {
	for _, l := range layers {
		if r, ok := l.(reporter); ok {
			r.ReportTo(store)
		}
	}
	return &Sequential{Layers: layers, store: store}
}

// reporter is a layer that reports its parameters ready during its
// Backward, as it finishes each.
type reporter interface {
	ReportTo(st *Store)
}

// Store returns the model's parameters.
func (s *Sequential) Store() *Store { return s.store }

// Forward runs the layers and returns the mean cross-entropy.
func (s *Sequential) Forward(b *Batch, train bool) (float32, error) {
	if b.XDim <= 0 || len(b.X) != b.N*b.XDim {
		return 0, errorf(ErrShape, "sequential: batch of %d rows has %d features for dimension %d: pass N·XDim features", b.N, len(b.X), b.XDim)
	}
	s.in = Tensor{Shape: []int{b.N, b.XDim}, Data: b.X}
	x := &s.in
	for _, l := range s.Layers {
		x = l.Forward(x, train)
	}
	return s.loss.Forward(x, b.Y)
}

// Backward runs the layers backwards, the last first, reporting each
// layer's parameters ready as soon as it is done.
func (s *Sequential) Backward(scale float32) {
	dy := s.loss.Backward(scale)
	for i := len(s.Layers) - 1; i >= 0; i-- {
		l := s.Layers[i]
		if i == 0 {
			dy = backwardNoInput(l, dy)
		} else {
			dy = l.Backward(dy)
		}
		if _, ok := l.(reporter); !ok {
			s.store.Ready(l.Params()...)
		}
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
