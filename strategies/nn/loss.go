package nn

import "math"

// CrossEntropy is softmax cross-entropy over logits of shape [..., V]
// against one class id per row, averaged over the rows whose target is not
// negative (a negative target is ignored, as PyTorch's ignore_index). Where
// every target is ignored the mean is of nothing: the loss is NaN, as
// PyTorch's, so that a step with nothing to learn from shows in the log,
// and the gradient zero, so that it harms no parameter.
type CrossEntropy struct {
	p       *Tensor // softmax of the logits, kept for Backward
	targets []int32
	counted int
	dx      *Tensor
}

// Forward returns the mean loss. It returns an error that wraps ErrShape
// if there is not one target per row or no row at all, and one that wraps
// ErrIndex for a target of V or more.
func (c *CrossEntropy) Forward(logits *Tensor, targets []int32) (float32, error) {
	rows, v := logits.Rows(), logits.Cols()
	if len(targets) != rows {
		return 0, errorf(ErrShape, "cross-entropy: %d targets for %d rows of logits: pass one target per row", len(targets), rows)
	}
	if rows == 0 {
		return 0, errorf(ErrShape, "cross-entropy: a batch of no rows: pass at least one (with data parallelism, a global batch of at least one example a rank)")
	}
	c.p = Resize(c.p, logits.Shape...)
	c.targets = targets
	c.counted = 0
	var total float64
	for r := 0; r < rows; r++ {
		t := targets[r]
		if t >= int32(v) {
			return 0, errorf(ErrIndex, "cross-entropy: row %d: target %d outside [0, %d): pass a class id below %d, or a negative one to ignore the row", r, t, v, v)
		}
		x := logits.Data[r*v : (r+1)*v]
		p := c.p.Data[r*v : (r+1)*v]
		lse := softmax(p, x)
		if t < 0 {
			continue
		}
		c.counted++
		total += lse - float64(x[t])
	}
	if c.counted == 0 {
		return float32(math.NaN()), nil // see CrossEntropy
	}
	return float32(total / float64(c.counted)), nil
}

// softmax writes softmax(x) to p and returns log Σ exp(x), computed
// from the row's maximum so that it cannot overflow.
func softmax(p, x []float32) float64 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		p[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range p {
		p[i] *= inv
	}
	return float64(m) + math.Log(sum)
}

// Backward returns the gradient of scale·loss with respect to the logits:
// scale·(softmax - onehot)/rows counted.
func (c *CrossEntropy) Backward(scale float32) *Tensor {
	c.dx = Resize(c.dx, c.p.Shape...)
	v := c.p.Cols()
	if c.counted == 0 {
		clear(c.dx.Data)
		return c.dx
	}
	k := scale / float32(c.counted)
	for r, t := range c.targets {
		d := c.dx.Data[r*v : (r+1)*v]
		if t < 0 {
			clear(d)
			continue
		}
		for i, p := range c.p.Data[r*v : (r+1)*v] {
			d[i] = p * k
		}
		d[t] -= k
	}
	return c.dx
}
