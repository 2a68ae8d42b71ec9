package tp

import (
	"fmt"
	"math"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// CrossEntropy is the vocabulary-parallel softmax cross-entropy of
// Megatron: each rank holds the columns [Lo, Hi) of the logits (the
// output of a column-parallel head) and no rank ever holds a whole row.
// Forward makes three all-reduces over the group, of one number per row
// each: the MAX of the rows' maxima (so that the exponentials cannot
// overflow), the SUM of the target's logit (the one rank that holds it
// contributes it, the others zero) and the SUM of the exponentials. The
// loss of a row is log Σ exp(z - max) - (z_target - max). Backward needs
// no communication: each rank's columns of softmax - onehot are its own
// exponentials over the summed ones. Rows whose target is negative are
// ignored, as nn.CrossEntropy ignores them; the loss is the mean over the
// others (NaN where there are none, as nn's).
type CrossEntropy struct {
	G      *Group
	Vocab  int
	Lo, Hi int

	p       *nn.Tensor // exp(z - max) / Σ, this rank's columns
	targets []int32
	counted int
	buf     []float32 // three numbers per row
	dx      *nn.Tensor
}

// NewCrossEntropy returns the loss over logits whose columns are this
// rank's block of vocab, cut as prims.Block cuts it (as NewColumnLinear's
// head and NewEmbedding cut it).
func NewCrossEntropy(g *Group, vocab int) *CrossEntropy {
	lo, hi := g.Part(vocab)
	return &CrossEntropy{G: g, Vocab: vocab, Lo: lo, Hi: hi}
}

// Forward returns the mean loss of the rows of logits, [..., Hi-Lo]. It
// fails with an error wrapping nn.ErrShape if there is not one target
// per row, and one wrapping nn.ErrIndex for a target of Vocab or more,
// before any communication.
func (c *CrossEntropy) Forward(logits *nn.Tensor, targets []int32) (float32, error) {
	rows, v := logits.Rows(), logits.Cols()
	if len(targets) != rows {
		return 0, fmt.Errorf("cross-entropy: %d targets for %d rows of logits: pass one target per row: %w", len(targets), rows, nn.ErrShape)
	}
	if rows == 0 {
		return 0, fmt.Errorf("cross-entropy: a batch of no rows: pass at least one (with data parallelism, a global batch of at least one example a rank): %w", nn.ErrShape)
	}
	if v != c.Hi-c.Lo {
		return 0, fmt.Errorf("cross-entropy: logits of %d columns for vocabulary block [%d, %d): %w", v, c.Lo, c.Hi, nn.ErrShape)
	}
	for r, t := range targets {
		if t >= int32(c.Vocab) {
			return 0, fmt.Errorf("cross-entropy: row %d: target %d outside [0, %d): pass a class id below %d, or a negative one to ignore the row: %w", r, t, c.Vocab, c.Vocab, nn.ErrIndex)
		}
	}
	c.targets = targets
	c.p = nn.Resize(c.p, logits.Shape...)
	if cap(c.buf) < 3*rows {
		c.buf = make([]float32, 3*rows)
	}
	maxes, tgt, sums := c.buf[:rows], c.buf[rows:2*rows], c.buf[2*rows:3*rows]

	// 1. The maximum of each row over the whole vocabulary.
	for r := 0; r < rows; r++ {
		m := float32(math.Inf(-1))
		for _, z := range logits.Data[r*v : (r+1)*v] {
			m = max(m, z)
		}
		maxes[r] = m
	}
	c.G.allReduceMax("cross-entropy max", maxes)

	// 2. The target's logit, shifted, from the rank that holds it.
	for r, t := range targets {
		tgt[r] = 0
		if int(t) >= c.Lo && int(t) < c.Hi {
			tgt[r] = logits.Data[r*v+int(t)-c.Lo] - maxes[r]
		}
	}
	c.G.allReduce("cross-entropy target logit", tgt)

	// 3. The sum of the exponentials.
	for r := 0; r < rows; r++ {
		var s float64
		p := c.p.Data[r*v : (r+1)*v]
		for j, z := range logits.Data[r*v : (r+1)*v] {
			e := math.Exp(float64(z - maxes[r]))
			p[j] = float32(e)
			s += e
		}
		sums[r] = float32(s)
	}
	c.G.allReduce("cross-entropy sum of exponentials", sums)

	var total float64
	c.counted = 0
	for r, t := range targets {
		inv := 1 / sums[r]
		for j := range c.p.Data[r*v : (r+1)*v] {
			c.p.Data[r*v+j] *= inv
		}
		if t < 0 {
			continue
		}
		c.counted++
		total += math.Log(float64(sums[r])) - float64(tgt[r])
	}
	if c.counted == 0 {
		return float32(math.NaN()), nil // as nn.CrossEntropy's
	}
	return float32(total / float64(c.counted)), nil
}

// Backward returns the gradient of scale·loss with respect to this
// rank's columns of the logits: scale·(softmax - onehot)/rows counted,
// without communication.
func (c *CrossEntropy) Backward(scale float32) *nn.Tensor {
	c.dx = nn.Resize(c.dx, c.p.Shape...)
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
		for j, p := range c.p.Data[r*v : (r+1)*v] {
			d[j] = p * k
		}
		if int(t) >= c.Lo && int(t) < c.Hi {
			d[int(t)-c.Lo] -= k
		}
	}
	return c.dx
}
