package tp

import "github.com/gorun-hpc/gorun/strategies/nn"

// Copy is Megatron's conjugate operator f, which enters a split region:
// the identity forward, and an all-reduce of the gradient backward (each
// rank's part of the region contributes to dL/dx).
type Copy struct {
	G  *Group
	dx *nn.Tensor
}

// Forward returns x.
func (c *Copy) Forward(x *nn.Tensor, _ bool) *nn.Tensor { return x }

// Backward returns the sum of dy over the group.
func (c *Copy) Backward(dy *nn.Tensor) *nn.Tensor {
	if !c.G.split() {
		return dy
	}
	c.dx = nn.Resize(c.dx, dy.Shape...)
	copy(c.dx.Data, dy.Data)
	c.G.allReduce("f backward", c.dx.Data)
	return c.dx
}

// Params is empty.
func (*Copy) Params() []*nn.Param { return nil }

// Reduce is Megatron's conjugate operator g, which leaves a split region:
// an all-reduce of the partial results forward, the identity backward.
type Reduce struct {
	G *Group
	y *nn.Tensor
}

// Forward returns the sum of x over the group.
func (r *Reduce) Forward(x *nn.Tensor, _ bool) *nn.Tensor {
	if !r.G.split() {
		return x
	}
	r.y = nn.Resize(r.y, x.Shape...)
	copy(r.y.Data, x.Data)
	r.G.allReduce("g forward", r.y.Data)
	return r.y
}

// Backward returns dy.
func (r *Reduce) Backward(dy *nn.Tensor) *nn.Tensor { return dy }

// Params is empty.
func (*Reduce) Params() []*nn.Param { return nil }

// GatherRows enters a split region from a sequence-parallel one: every
// rank holds a block of the token rows, and forward all-gathers them into
// the whole activation (of the shape the group's Tokens gives), backward
// reduce-scatters the gradient back to the rank's rows. It is f of
// sequence parallelism.
type GatherRows struct {
	G     *Group
	y, dx *nn.Tensor
}

// Forward returns every rank's rows, in rank order.
func (a *GatherRows) Forward(x *nn.Tensor, _ bool) *nn.Tensor {
	a.y = nn.Resize(a.y, a.G.full(x.Cols())...)
	a.G.allGather("sequence all-gather", x.Data, a.y.Data)
	return a.y
}

// Backward returns the rank's rows of the gradient summed over the group.
func (a *GatherRows) Backward(dy *nn.Tensor) *nn.Tensor {
	a.dx = nn.Resize(a.dx, a.G.local(dy.Cols())...)
	a.G.reduceScatter("sequence reduce-scatter", dy.Data, a.dx.Data)
	return a.dx
}

// Params is empty.
func (*GatherRows) Params() []*nn.Param { return nil }

// ScatterRows leaves a split region into a sequence-parallel one: forward
// reduce-scatters the partial results so that each rank holds the sum of
// its block of token rows; backward all-gathers the gradient's rows. It
// is g of sequence parallelism.
type ScatterRows struct {
	G     *Group
	y, dx *nn.Tensor
}

// Forward returns the rank's rows of x summed over the group.
func (s *ScatterRows) Forward(x *nn.Tensor, _ bool) *nn.Tensor {
	s.y = nn.Resize(s.y, s.G.local(x.Cols())...)
	s.G.reduceScatter("sequence reduce-scatter", x.Data, s.y.Data)
	return s.y
}

// Backward returns every rank's rows of dy.
func (s *ScatterRows) Backward(dy *nn.Tensor) *nn.Tensor {
	s.dx = nn.Resize(s.dx, s.G.full(dy.Cols())...)
	s.G.allGather("sequence all-gather", dy.Data, s.dx.Data)
	return s.dx
}

// Params is empty.
func (*ScatterRows) Params() []*nn.Param { return nil }

// GatherCols all-gathers the last dimension: each rank holds an equal
// block of the columns, and forward returns them all side by side, in
// rank order; backward returns the rank's columns of the gradient
// (ColumnLinear's gather_output).
type GatherCols struct {
	G     *Group
	buf   []float32
	y, dx *nn.Tensor
}

// Forward returns x's rows with every rank's columns.
func (a *GatherCols) Forward(x *nn.Tensor, _ bool) *nn.Tensor {
	cols, rows, n := x.Cols(), x.Rows(), a.G.Size
	a.y = nn.Resize(a.y, withCols(x.Shape, cols*n)...)
	if cap(a.buf) < len(x.Data)*n {
		a.buf = make([]float32, len(x.Data)*n)
	}
	all := a.buf[:len(x.Data)*n]
	a.G.allGather("column all-gather", x.Data, all)
	for k := 0; k < n; k++ {
		part := all[k*rows*cols:]
		for r := 0; r < rows; r++ {
			copy(a.y.Data[r*cols*n+k*cols:r*cols*n+(k+1)*cols], part[r*cols:(r+1)*cols])
		}
	}
	return a.y
}

// Backward returns the rank's columns of dy.
func (a *GatherCols) Backward(dy *nn.Tensor) *nn.Tensor {
	n := a.G.Size
	cols := dy.Cols() / n
	rows := dy.Rows()
	a.dx = nn.Resize(a.dx, withCols(dy.Shape, cols)...)
	k := a.G.Rank
	for r := 0; r < rows; r++ {
		copy(a.dx.Data[r*cols:(r+1)*cols], dy.Data[r*cols*n+k*cols:r*cols*n+(k+1)*cols])
	}
	return a.dx
}

// Params is empty.
func (*GatherCols) Params() []*nn.Param { return nil }

// withCols is shape with its last dimension replaced by n.
func withCols(shape []int, n int) []int {
	s := append([]int(nil), shape...)
	s[len(s)-1] = n
	return s
}
