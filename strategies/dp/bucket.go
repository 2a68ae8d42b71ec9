package dp

import (
	"fmt"
	"sort"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Default bucket sizes: PyTorch DDP's 25 MiB cap and 1 MiB first bucket.
const (
	DefaultBucketCap   = 25 << 20
	DefaultFirstBucket = 1 << 20
)

// plan cuts the flat gradient buffer into buckets in the order backward
// produces gradients, which is the layout order reversed: each layer's
// parameters follow the layers below it in the buffer, and backward
// finishes the top layer first. A bucket is a contiguous range of the
// buffer. It takes whole parameters, from the top down, until the next
// would pass its cap (first for the first bucket, capBytes after); a
// parameter larger than the cap is cut into cap-sized pieces, each a
// bucket of its own, so that the rows of a large layer that backward
// reports first (nn.Linear reports by row blocks) are reduced while it
// computes the rest.
func plan(ps []*nn.Param, grads []float32, first, capBytes int) []*Bucket {
	var out []*Bucket
	var cur *Bucket
	limit := first / 4 // in elements
	close := func() {
		if cur != nil {
			out = append(out, cur)
			cur, limit = nil, capBytes/4
		}
	}
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if cur != nil && cur.Hi-p.Offset > limit {
			close()
		}
		if p.Len() <= limit || cur != nil {
			if cur == nil {
				cur = &Bucket{Hi: p.End()}
			}
			cur.Lo = p.Offset
			cur.Params = append(cur.Params, p)
			continue
		}
		for hi := p.End(); hi > p.Offset; {
			lo := max(p.Offset, hi-limit)
			out = append(out, &Bucket{Lo: lo, Hi: hi, Params: []*nn.Param{p}})
			hi, limit = lo, capBytes/4
		}
	}
	close()
	for i, b := range out {
		b.Index = i
		b.Grads = grads[b.Lo:b.Hi:b.Hi]
	}
	return out
}

// within returns the indices of the buckets that overlap [lo, hi): the
// buckets run down the buffer, so they are consecutive.
func within(bs []*Bucket, lo, hi int) (first, last int) {
	first = sort.Search(len(bs), func(i int) bool { return bs[i].Lo < hi })
	last = first
	for last < len(bs) && bs[last].Hi > lo {
		last++
	}
	return first, last
}

// checkLayout says whether the parameters tile [0, n) in layout order,
// which the bucket plan relies on.
func checkLayout(ps []*nn.Param, n int) error {
	at := 0
	for _, p := range ps {
		if p.Offset != at {
			return fmt.Errorf("parameter %s starts at %d, want %d: the parameters do not tile the flat buffer", p.Name, p.Offset, at)
		}
		at = p.End()
	}
	if at != n {
		return fmt.Errorf("parameters end at %d, the flat buffer at %d", at, n)
	}
	return nil
}
