package tp

import (
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Range is a half-open range [Lo, Hi) of rows or columns.
type Range struct{ Lo, Hi int }

// Len is Hi - Lo.
func (r Range) Len() int { return r.Hi - r.Lo }

// Shard says which part of a whole (unsplit) parameter a rank's parameter
// holds: the whole parameter's shape, and the rows (Dim 0) or columns
// (Dim 1) it keeps, in order; Dim -1 for a parameter every rank holds
// whole. A 1-D parameter (a bias) split by columns keeps elements.
type Shard struct {
	Param *nn.Param
	Full  []int
	Dim   int
	Parts []Range
}

// Sliced returns an Init that draws the whole parameter of shape full
// with init, from the stream the unsplit model would use (nn.Builder
// names it after the parameter, which keeps its name), and keeps the
// given rows (dim 0) or columns (dim 1): the split model starts from the
// single-process model's weights exactly, as Megatron's CPU
// initialisation does.
func Sliced(init nn.Init, full []int, dim int, parts []Range) nn.Init {
	return func(w []float32, s *nn.Stream) {
		n := 1
		for _, d := range full {
			n *= d
		}
		all := make([]float32, n)
		init(all, s)
		cut(w, all, full, dim, parts)
	}
}

// cut copies the parts of whole (of shape full) along dim into w.
func cut(w, whole []float32, full []int, dim int, parts []Range) {
	rows, cols := 1, full[len(full)-1]
	if len(full) == 2 {
		rows = full[0]
	}
	at := 0
	switch dim {
	case 0:
		for _, p := range parts {
			at += copy(w[at:], whole[p.Lo*cols:p.Hi*cols])
		}
	default:
		for r := 0; r < rows; r++ {
			for _, p := range parts {
				at += copy(w[at:], whole[r*cols+p.Lo:r*cols+p.Hi])
			}
		}
	}
}

// Paste is cut's inverse: it writes a rank's part w back into whole, so
// that a test or a checkpoint can rebuild the unsplit parameter.
func (s Shard) Paste(whole, w []float32) {
	rows, cols := 1, s.Full[len(s.Full)-1]
	if len(s.Full) == 2 {
		rows = s.Full[0]
	}
	if s.Dim < 0 {
		copy(whole, w)
		return
	}
	at := 0
	if s.Dim == 0 {
		for _, p := range s.Parts {
			at += copy(whole[p.Lo*cols:p.Hi*cols], w[at:])
		}
		return
	}
	for r := 0; r < rows; r++ {
		for _, p := range s.Parts {
			at += copy(whole[r*cols+p.Lo:r*cols+p.Hi], w[at:at+p.Len()])
		}
	}
}

func total(parts []Range) int {
	n := 0
	for _, p := range parts {
		n += p.Len()
	}
	return n
}

// ColumnLinear is Megatron's ColumnParallelLinear: y = x·W + b with W's
// columns (and b's elements) split over the group, so each rank computes
// its columns of y. Its input enters the split region through f (Copy),
// or through an all-gather of the token rows with sequence parallelism;
// with Gather set, the columns of y are all-gathered back into the whole
// output (the parts must then be equal).
type ColumnLinear struct {
	G       *Group
	In, Out int        // the whole layer's sizes
	Cols    []Range    // this rank's columns of the whole output, in order
	Lin     *nn.Linear // over the rank's columns: [In, len(Cols)]
	Gather  bool

	enter  nn.Layer
	gather *GatherCols
}

// NewColumnLinear declares weight [In, n] and, with bias, bias [n] under
// b, n the columns in cols, drawn as the unsplit layer's (weight by init,
// bias zero) would be and cut.
func NewColumnLinear(b *nn.Builder, g *Group, in, out int, bias bool, init nn.Init, cols []Range) *ColumnLinear {
	n := total(cols)
	lin := &nn.Linear{In: in, Out: n, W: b.Param("weight", Sliced(init, []int{in, out}, 1, cols), true, in, n)}
	if bias {
		lin.B = b.Param("bias", nn.Zeros(), false, n)
	}
	c := &ColumnLinear{G: g, In: in, Out: out, Cols: cols, Lin: lin}
	if g.SeqParallel {
		c.enter = &GatherRows{G: g}
	} else {
		c.enter = &Copy{G: g}
	}
	c.gather = &GatherCols{G: g}
	return c
}

// Params lists the weight, then the bias.
func (c *ColumnLinear) Params() []*nn.Param { return c.Lin.Params() }

// Shards says which columns of the whole layer's parameters this rank holds.
func (c *ColumnLinear) Shards() []Shard {
	s := []Shard{{Param: c.Lin.W, Full: []int{c.In, c.Out}, Dim: 1, Parts: c.Cols}}
	if c.Lin.B != nil {
		s = append(s, Shard{Param: c.Lin.B, Full: []int{c.Out}, Dim: 1, Parts: c.Cols})
	}
	return s
}

// Forward returns the rank's columns of x·W + b, or all of them with Gather.
func (c *ColumnLinear) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	y := c.Lin.Forward(c.enter.Forward(x, train), train)
	if c.Gather {
		return c.gather.Forward(y, train)
	}
	return y
}

// Backward adds the gradients of the rank's columns and returns dL/dx,
// summed over the group (or reduce-scattered to the rank's rows).
func (c *ColumnLinear) Backward(dy *nn.Tensor) *nn.Tensor {
	if c.Gather {
		dy = c.gather.Backward(dy)
	}
	return c.enter.Backward(c.Lin.Backward(dy))
}

// RowLinear is Megatron's RowParallelLinear: y = x·W + b with W's rows
// split over the group and x already split by columns the same way (the
// output of a ColumnLinear), so each rank computes a partial x·W, which
// g (Reduce) sums, or a reduce-scatter of the token rows with sequence
// parallelism; the bias, whole on every rank, is added once after.
type RowLinear struct {
	G       *Group
	In, Out int        // the whole layer's sizes
	Rows    []Range    // this rank's rows of the whole weight (its input columns)
	Lin     *nn.Linear // [len(Rows), Out], no bias
	B       *nn.Param  // bias [Out], or nil

	leave nn.Layer
	y     *nn.Tensor
}

// NewRowLinear declares weight [n, Out] (n the rows in rows) and, with
// bias, bias [Out] under b, drawn as the unsplit layer's would be.
func NewRowLinear(b *nn.Builder, g *Group, in, out int, bias bool, init nn.Init, rows []Range) *RowLinear {
	n := total(rows)
	r := &RowLinear{G: g, In: in, Out: out, Rows: rows}
	r.Lin = &nn.Linear{In: n, Out: out, W: b.Param("weight", Sliced(init, []int{in, out}, 0, rows), true, n, out)}
	if bias {
		r.B = b.Param("bias", nn.Zeros(), false, out)
	}
	if g.SeqParallel {
		r.leave = &ScatterRows{G: g}
	} else {
		r.leave = &Reduce{G: g}
	}
	return r
}

// Params lists the weight, then the bias.
func (r *RowLinear) Params() []*nn.Param {
	if r.B == nil {
		return []*nn.Param{r.Lin.W}
	}
	return []*nn.Param{r.Lin.W, r.B}
}

// Shards says which rows of the whole weight this rank holds; the bias is whole.
func (r *RowLinear) Shards() []Shard {
	s := []Shard{{Param: r.Lin.W, Full: []int{r.In, r.Out}, Dim: 0, Parts: r.Rows}}
	if r.B != nil {
		s = append(s, Shard{Param: r.B, Full: []int{r.Out}, Dim: -1})
	}
	return s
}

// Forward returns x·W + b, whole (or the rank's token rows of it).
func (r *RowLinear) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	part := r.leave.Forward(r.Lin.Forward(x, train), train)
	if r.B == nil {
		return part
	}
	r.y = nn.Resize(r.y, part.Shape...)
	rows, n := part.Rows(), r.Out
	for i := 0; i < rows; i++ {
		yr, pr := r.y.Data[i*n:(i+1)*n], part.Data[i*n:(i+1)*n]
		for j, v := range pr {
			yr[j] = v + r.B.W[j]
		}
	}
	return r.y
}

// Backward adds the bias's gradient (the rank's rows' part of it with
// sequence parallelism, which the model sums over the group) and the
// weight's rows', and returns the gradient of the rank's input columns.
func (r *RowLinear) Backward(dy *nn.Tensor) *nn.Tensor {
	if r.B != nil {
		rows, n := dy.Rows(), r.Out
		for i := 0; i < rows; i++ {
			for j, v := range dy.Data[i*n : (i+1)*n] {
				r.B.G[j] += v
			}
		}
	}
	return r.Lin.Backward(r.leave.Backward(dy))
}
