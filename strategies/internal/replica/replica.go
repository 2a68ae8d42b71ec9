package replica

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Same returns, on every rank of c alike, an error unless every rank's
// store has rank 0's parameters: as many elements, in as many units, and
// the same shapes in the same order (PyTorch DDP checks the shapes too).
// who starts the error ("dp", "zero", "ps"). Every rank of c calls it.
func Same(ctx context.Context, c *spmd.Comm, st *nn.Store, who string) error {
	mine := Signature(st)
	sig := []int64{mine}
	if err := prims.Broadcast(ctx, c, sig, 0); err != nil {
		return fmt.Errorf("%s: comparing the ranks' models: %w", who, err)
	}
	n, units := int64(len(st.W)), int64(len(st.Units))
	// One max-reduction gives the least and most of each count and the
	// first rank whose shapes differ from rank 0's (as minus its rank).
	first := int64(-math.MaxInt64)
	if sig[0] != mine {
		first = -int64(c.Rank())
	}
	v := []int64{n, -n, units, -units, first}
	if err := prims.AllReduce(ctx, c, v, prims.Max[int64]()); err != nil {
		return fmt.Errorf("%s: comparing the ranks' models: %w", who, err)
	}
	if v[4] == -math.MaxInt64 {
		return nil
	}
	odd := -v[4]
	if v[0] != -v[1] || v[2] != -v[3] {
		return fmt.Errorf("%s: the ranks' models differ: %d to %d parameters in %d to %d units (this rank %d in %d; rank %d's differs from rank 0's); every rank must build the same model",
			who, -v[1], v[0], -v[3], v[2], n, units, odd)
	}
	return fmt.Errorf("%s: the ranks' models differ: rank %d's parameters have other shapes than rank 0's, the same %d numbers in %d units (this rank's: %s); every rank must build the same model",
		who, odd, n, units, shapes(st, 4))
}

// Signature is a hash of the store's layout: its parameters' shapes in
// order, and its units' bounds. Names are left out: two ranks may name one
// model's parameters alike or not, as PyTorch's check ignores them too.
func Signature(st *nn.Store) int64 {
	h := fnv.New64a()
	word := func(x int) {
		var b [8]byte
		for i := range b {
			b[i] = byte(uint64(x) >> (8 * i))
		}
		h.Write(b[:])
	}
	word(len(st.Params))
	for _, p := range st.Params {
		word(len(p.Shape))
		for _, d := range p.Shape {
			word(d)
		}
	}
	word(len(st.Units))
	for _, u := range st.Units {
		word(u.Lo)
		word(u.Hi)
	}
	return int64(h.Sum64())
}

// shapes lists the first most parameters as "name [d0 d1]".
func shapes(st *nn.Store, most int) string {
	var b strings.Builder
	for i, p := range st.Params {
		if i == most {
			fmt.Fprintf(&b, ", ... %d in all", len(st.Params))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", p.Name, p.Shape)
	}
	return b.String()
}
