package nn

import "fmt"

// Linear is y = x·W + b, with W of shape [in, out] (the layout whose
// forward and backward products run fastest: no operand of the forward
// product is transposed). Its input may have any number of leading
// dimensions.
type Linear struct {
	In, Out int
	W, B    *Param // B is nil without bias

	x     *Tensor // the input, kept for Backward
	y, dx *Tensor
	st    *Store // set by ReportTo: Backward reports W and B itself
}

// partElems is about how many elements of W's gradient Linear computes
// and reports at a time when a driver listens for parts (256 Ki floats,
// 1 MiB): a data-parallel driver then reduces the last rows of a large
// layer's gradient while the others are computed.
const partElems = 256 << 10

// ReportTo makes Backward report W and B ready to st itself, W row block
// by row block when st listens for parts, instead of leaving it to the
// model after the whole layer.
func (l *Linear) ReportTo(st *Store) { l.st = st }

// NewLinear declares W and, if bias, B under b, initialised as PyTorch's
// Linear: U(-1/sqrt(in), 1/sqrt(in)).
func NewLinear(b *Builder, in, out int, bias bool) *Linear {
	l := &Linear{In: in, Out: out, W: b.Param("weight", FanIn(in), true, in, out)}
	if bias {
		l.B = b.Param("bias", FanIn(in), false, out)
	}
	return l
}

// NewLinearInit is NewLinear with the weight drawn by init and the bias
// set to zero (GPT-2's N(0, 0.02) weights).
func NewLinearInit(b *Builder, in, out int, bias bool, init Init) *Linear {
	l := &Linear{In: in, Out: out, W: b.Param("weight", init, true, in, out)}
	if bias {
		l.B = b.Param("bias", Zeros(), false, out)
	}
	return l
}

func (l *Linear) inputWidth() int { return l.In }

// Params lists W, then B.
func (l *Linear) Params() []*Param {
	if l.B == nil {
		return []*Param{l.W}
	}
	return []*Param{l.W, l.B}
}

// Forward returns x·W + b; the result is the layer's until its next call.
// It panics if x's last dimension is not In, which is a programming error.
func (l *Linear) Forward(x *Tensor, _ bool) *Tensor {
	if x.Cols() != l.In {
		panic(fmt.Sprintf("nn: Linear of %d inputs given input of shape %v", l.In, x.Shape))
	}
	rows := x.Rows()
	l.x = x
	l.y = Resize(l.y, withCols(x.Shape, l.Out)...)
	beta := float32(0)
	if l.B != nil {
		for r := 0; r < rows; r++ {
			copy(l.y.Data[r*l.Out:(r+1)*l.Out], l.B.W)
		}
		beta = 1
	}
	matmul(false, false, rows, l.Out, l.In, x.Data, l.W.W, beta, l.y.Data)
	return l.y
}

// Backward adds dL/dW = xᵀ·dy and dL/db = Σ dy to the gradients and
// returns dL/dx = dy·Wᵀ.
func (l *Linear) Backward(dy *Tensor) *Tensor {
	l.BackwardParams(dy)
	rows := dy.Rows()
	l.dx = Resize(l.dx, l.x.Shape...)
	matmul(false, true, rows, l.In, l.Out, dy.Data, l.W.W, 0, l.dx.Data)
	return l.dx
}

// ReLU is max(x, 0), element-wise.
type ReLU struct {
	y, dx *Tensor
}

// Params is empty.
func (*ReLU) Params() []*Param { return nil }

// Forward returns max(x, 0).
func (a *ReLU) Forward(x *Tensor, _ bool) *Tensor {
	a.y = Resize(a.y, x.Shape...)
	for i, v := range x.Data {
		a.y.Data[i] = max(v, 0)
	}
	return a.y
}

// Backward passes dy where the output was positive.
func (a *ReLU) Backward(dy *Tensor) *Tensor {
	a.dx = Resize(a.dx, dy.Shape...)
	for i, v := range a.y.Data {
		if v > 0 {
			a.dx.Data[i] = dy.Data[i]
		} else {
			a.dx.Data[i] = 0
		}
	}
	return a.dx
}

// BackwardParams is Backward without dL/dx, for the first layer of a
// network, whose input needs no gradient. The parameters' gradients come
// first, so that a layer that reports them (ReportTo) does so before it
// computes dL/dx, and in the order a data-parallel driver reduces the
// flat buffer, from the top down: B (which follows W in the buffer), then
// W's rows from the last block to the first.
func (l *Linear) BackwardParams(dy *Tensor) {
	rows := dy.Rows()
	if l.B != nil {
		addRows(l.B.G, dy.Data, rows)
		if l.st != nil {
			l.st.Ready(l.B)
		}
	}
	if l.st == nil || !l.st.Parts() || l.In*l.Out <= partElems {
		matmul(true, false, l.In, l.Out, rows, l.x.Data, dy.Data, 1, l.W.G)
		if l.st != nil {
			l.st.Ready(l.W)
		}
		return
	}
	// dW's rows i0..i1 are x's columns i0..i1 (a strided block) times dy.
	parts := (l.In*l.Out + partElems - 1) / partElems
	step := (l.In + parts - 1) / parts
	for i1 := l.In; i1 > 0; i1 -= step {
		i0 := max(0, i1-step)
		matmulStrided(true, false, i1-i0, l.Out, rows, l.x.Data[i0:], l.In, dy.Data, l.Out, 1, l.W.G[i0*l.Out:], l.Out)
		l.st.ReadyPart(l.W, i0*l.Out, i1*l.Out)
	}
}

// addRows adds each of the rows of m (rows of len(g)) to g.
func addRows(g, m []float32, rows int) {
	n := len(g)
	for r := 0; r < rows; r++ {
		for j, v := range m[r*n : (r+1)*n] {
			g[j] += v
		}
	}
}
