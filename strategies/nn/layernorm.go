package nn

import (
	"fmt"
	"math"
)

// LayerNorm normalises each row of its input over the last dimension and
// applies a learned gain and offset:
//
//	y = (x - mean(x)) / √(var(x) + Eps) · weight + bias
//
// with the biased variance, as PyTorch's LayerNorm. Its input may have
// any number of leading dimensions.
type LayerNorm struct {
	Dim int
	Eps float32
	W   *Param // the gain, "weight", initialised to one
	B   *Param // the offset, "bias", initialised to zero

	xhat  *Tensor   // the normalised input, kept for Backward
	rstd  []float32 // 1/√(var + Eps) per row, kept for Backward
	y, dx *Tensor
}

// NewLayerNorm declares weight and bias of [dim] under b, without weight
// decay, and uses Eps 1e-5.
func NewLayerNorm(b *Builder, dim int) *LayerNorm {
	return &LayerNorm{
		Dim: dim,
		Eps: 1e-5,
		W:   b.Param("weight", Ones(), false, dim),
		B:   b.Param("bias", Zeros(), false, dim),
	}
}

// Params lists W, then B.
func (l *LayerNorm) Params() []*Param { return []*Param{l.W, l.B} }

// Forward returns the normalised rows. It panics if the input's last
// dimension is not Dim, which is a programming error.
func (l *LayerNorm) Forward(x *Tensor, _ bool) *Tensor {
	if x.Cols() != l.Dim {
		panic(fmt.Sprintf("nn: LayerNorm of %d features given input of shape %v", l.Dim, x.Shape))
	}
	n, rows := l.Dim, x.Rows()
	l.y = Resize(l.y, x.Shape...)
	l.xhat = Resize(l.xhat, x.Shape...)
	if cap(l.rstd) < rows {
		l.rstd = make([]float32, rows)
	}
	l.rstd = l.rstd[:rows]
	g, b := l.W.W, l.B.W
	for r := 0; r < rows; r++ {
		xr := x.Data[r*n : (r+1)*n]
		var sum float64
		for _, v := range xr {
			sum += float64(v)
		}
		mean := sum / float64(n)
		var ss float64
		for _, v := range xr {
			d := float64(v) - mean
			ss += d * d
		}
		rstd := 1 / math.Sqrt(ss/float64(n)+float64(l.Eps))
		l.rstd[r] = float32(rstd)
		h, y := l.xhat.Data[r*n:(r+1)*n], l.y.Data[r*n:(r+1)*n]
		for i, v := range xr {
			h[i] = float32((float64(v) - mean) * rstd)
			y[i] = h[i]*g[i] + b[i]
		}
	}
	return l.y
}

// Backward adds dL/dweight = Σ dy·x̂ and dL/dbias = Σ dy to the gradients
// and returns dL/dx = rstd·(d - mean(d) - x̂·mean(d·x̂)), where d = dy·weight.
func (l *LayerNorm) Backward(dy *Tensor) *Tensor {
	n, rows := l.Dim, dy.Rows()
	l.dx = Resize(l.dx, dy.Shape...)
	g, gg, gb := l.W.W, l.W.G, l.B.G
	for r := 0; r < rows; r++ {
		dyr, h := dy.Data[r*n:(r+1)*n], l.xhat.Data[r*n:(r+1)*n]
		var s1, s2 float64
		for i, d := range dyr {
			gg[i] += d * h[i]
			gb[i] += d
			dg := float64(d * g[i])
			s1 += dg
			s2 += dg * float64(h[i])
		}
		m1, m2 := float32(s1/float64(n)), float32(s2/float64(n))
		rstd := l.rstd[r]
		dx := l.dx.Data[r*n : (r+1)*n]
		for i, d := range dyr {
			dx[i] = rstd * (d*g[i] - m1 - h[i]*m2)
		}
	}
	return l.dx
}
