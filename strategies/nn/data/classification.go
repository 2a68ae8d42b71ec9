package data

import (
	"math"
	"math/rand/v2"
)

// separation is the expected distance between two class centres of a
// Synthetic set, in units of the noise's standard deviation: far enough
// apart that a classifier can learn the classes, close enough that
// neighbouring classes overlap and no classifier is perfect.
const separation = 5.0

// Classification is an in-memory classification data set: n examples of
// Dim() features each, every one labelled with a class in [0, Classes()).
// It is safe for concurrent reads.
type Classification struct {
	// X holds the features, n rows of Dim() values, row-major.
	X []float32
	// Y holds the labels, one per row of X.
	Y []int32

	dim, classes int
}

// Synthetic returns a deterministic classification set of n examples with
// dim features and classes classes: each class is a Gaussian cluster around
// a random centre, with unit noise in every dimension. The centres lie about
// five noise deviations apart whatever dim is, so the classes overlap a
// little: a linear model or a small MLP learns them well, and none scores
// 100%. Labels are drawn uniformly.
//
// The set depends only on (n, dim, classes, seed), and the first n examples
// of a larger set with the same dim, classes and seed are the set of n: to
// hold out a test set, make n+m examples and sample training batches from
// the first n. The draws use a PCG generator's raw output, so the set is the
// same under every Go release.
//
// It fails with an error that wraps ErrArgument if n or dim is not positive
// or classes is less than 2.
func Synthetic(n, dim, classes int, seed uint64) (*Classification, error) {
	switch {
	case n <= 0:
		return nil, errorf(ErrArgument, "synthetic set of %d examples: pass at least 1", n)
	case dim <= 0:
		return nil, errorf(ErrArgument, "synthetic set of dimension %d: pass at least 1", dim)
	case classes < 2:
		return nil, errorf(ErrArgument, "synthetic set of %d classes: pass at least 2", classes)
	}
	// Distinct streams for the centres and the examples, so that the
	// examples do not depend on how many centres were drawn before them.
	centreSrc := rand.NewPCG(seed, 0x63656e747265)  // "centre"
	exampleSrc := rand.NewPCG(seed, 0x6578616d706c) // "exampl"

	scale := separation / math.Sqrt(2*float64(dim))
	centres := make([]float64, classes*dim)
	for i := range centres {
		centres[i] = scale * normal(centreSrc)
	}
	c := &Classification{
		X:       make([]float32, n*dim),
		Y:       make([]int32, n),
		dim:     dim,
		classes: classes,
	}
	for i := range n {
		k := int(bounded(exampleSrc, uint64(classes)))
		c.Y[i] = int32(k)
		row := c.X[i*dim : (i+1)*dim]
		mu := centres[k*dim : (k+1)*dim]
		for d := range row {
			row[d] = float32(mu[d] + normal(exampleSrc))
		}
	}
	return c, nil
}

// Len returns the number of examples.
func (c *Classification) Len() int { return len(c.Y) }

// Dim returns the number of features of an example.
func (c *Classification) Dim() int { return c.dim }

// Classes returns the number of classes; labels lie in [0, Classes()).
func (c *Classification) Classes() int { return c.classes }

// Batch copies the examples idx into the caller's buffers: row j of the
// batch, example idx[j], goes to x[j*Dim() : (j+1)*Dim()] and its label to
// y[j]. It allocates nothing. It fails with an error that wraps ErrArgument,
// and writes nothing, if x or y is too short for len(idx) examples or an
// index lies outside [0, Len()).
func (c *Classification) Batch(idx []int, x []float32, y []int32) error {
	if len(x) < len(idx)*c.dim || len(y) < len(idx) {
		return errorf(ErrArgument, "batch of %d examples of dimension %d needs x of %d and y of %d, got %d and %d: size the buffers for the batch",
			len(idx), c.dim, len(idx)*c.dim, len(idx), len(x), len(y))
	}
	for j, i := range idx {
		if i < 0 || i >= len(c.Y) {
			return errorf(ErrArgument, "index %d (batch row %d) outside the data set of %d examples", i, j, len(c.Y))
		}
	}
	for j, i := range idx {
		copy(x[j*c.dim:(j+1)*c.dim], c.X[i*c.dim:(i+1)*c.dim])
		y[j] = c.Y[i]
	}
	return nil
}

// normal returns a standard normal draw, by the Box-Muller transform of two
// uniform draws from src.
func normal(src *rand.PCG) float64 {
	// 53-bit uniforms; u1 in (0, 1] so that its logarithm is finite.
	u1 := (float64(src.Uint64()>>11) + 1) / (1 << 53)
	u2 := float64(src.Uint64()>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}
