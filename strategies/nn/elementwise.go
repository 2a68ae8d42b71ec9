package nn

import "math"

// GeLU is the Gaussian error linear unit x·Φ(x), element-wise. By default
// it is the tanh approximation that GPT-2 was trained with (nanoGPT's
// NewGELU, PyTorch's GELU(approximate="tanh")):
//
//	gelu(x) = x/2 · (1 + tanh(√(2/π)·(x + 0.044715·x³)))
//
// With Exact set it is the erf form, x/2 · (1 + erf(x/√2)), PyTorch's
// default GELU. The two differ by less than 1e-3 everywhere.
type GeLU struct {
	Exact bool

	x     *Tensor // the input, kept for Backward
	y, dx *Tensor
}

const (
	geluC      = 0.7978845608028654 // √(2/π)
	geluA      = 0.044715
	invSqrt2   = 0.7071067811865476 // 1/√2
	invSqrt2Pi = 0.3989422804014327 // 1/√(2π)
)

// Params is empty.
func (*GeLU) Params() []*Param { return nil }

// Forward returns gelu(x).
func (a *GeLU) Forward(x *Tensor, _ bool) *Tensor {
	a.x = x
	a.y = Resize(a.y, x.Shape...)
	y := a.y.Data
	if a.Exact {
		for i, v := range x.Data {
			u := float64(v)
			y[i] = float32(0.5 * u * (1 + math.Erf(u*invSqrt2)))
		}
		return a.y
	}
	for i, v := range x.Data {
		u := float64(v)
		y[i] = float32(0.5 * u * (1 + math.Tanh(geluC*(u+geluA*u*u*u))))
	}
	return a.y
}

// Backward returns dy·gelu'(x). For the tanh form, with t the tanh above,
// gelu'(x) = (1+t)/2 + x/2·(1-t²)·√(2/π)·(1 + 3·0.044715·x²); for the erf
// form, Φ(x) + x·φ(x).
func (a *GeLU) Backward(dy *Tensor) *Tensor {
	a.dx = Resize(a.dx, dy.Shape...)
	dx := a.dx.Data
	if a.Exact {
		for i, v := range a.x.Data {
			u := float64(v)
			d := 0.5*(1+math.Erf(u*invSqrt2)) + u*invSqrt2Pi*math.Exp(-0.5*u*u)
			dx[i] = dy.Data[i] * float32(d)
		}
		return a.dx
	}
	for i, v := range a.x.Data {
		u := float64(v)
		t := math.Tanh(geluC * (u + geluA*u*u*u))
		d := 0.5*(1+t) + 0.5*u*(1-t*t)*geluC*(1+3*geluA*u*u)
		dx[i] = dy.Data[i] * float32(d)
	}
	return a.dx
}

// Dropout is inverted dropout: while training it zeroes each element with
// probability P and scales the others by 1/(1-P), so that evaluation
// passes its input through unchanged. It also passes its input through,
// and draws nothing, when P is 0.
//
// The mask comes from Stream, one Float32 draw per element in row-major
// order, so a model that gives all its dropout layers one stream (and
// saves the stream's state in its checkpoints) draws on resuming what an
// uninterrupted run would. A nil Stream is replaced by the stream named
// "dropout" under seed 0 at the first training Forward.
type Dropout struct {
	P      float32
	Stream *Stream

	active bool      // whether the last Forward applied a mask
	mask   []float32 // 0 or 1/(1-P) per element, for Backward
	y, dx  *Tensor
}

// NewDropout returns dropout with probability p drawing from s.
func NewDropout(p float32, s *Stream) *Dropout { return &Dropout{P: p, Stream: s} }

// Params is empty.
func (*Dropout) Params() []*Param { return nil }

// Forward returns x with dropout applied when training and P > 0, and x
// itself otherwise. With P of 1 or more, every element is dropped.
func (d *Dropout) Forward(x *Tensor, train bool) *Tensor {
	d.active = train && d.P > 0
	if !d.active {
		return x
	}
	if d.Stream == nil {
		d.Stream = NewStream(0, "dropout", 0)
	}
	scale := float32(0)
	if d.P < 1 {
		scale = 1 / (1 - d.P)
	}
	n := x.Len()
	if cap(d.mask) < n {
		d.mask = make([]float32, n)
	}
	d.mask = d.mask[:n]
	for i := range d.mask {
		if d.Stream.Float32() < d.P {
			d.mask[i] = 0
		} else {
			d.mask[i] = scale
		}
	}
	d.y = Resize(d.y, x.Shape...)
	for i, v := range x.Data {
		d.y.Data[i] = v * d.mask[i]
	}
	return d.y
}

// Backward returns dy through the last Forward's mask: dy itself if that
// Forward passed its input through.
func (d *Dropout) Backward(dy *Tensor) *Tensor {
	if !d.active {
		return dy
	}
	d.dx = Resize(d.dx, dy.Shape...)
	for i, v := range dy.Data {
		d.dx.Data[i] = v * d.mask[i]
	}
	return d.dx
}
