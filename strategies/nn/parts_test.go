package nn

import (
	"math/rand/v2"
	"testing"
)

// TestLinearParts: with a listener for ranges, a Linear whose weight has
// more than partElems elements reports its bias, then its weight's
// gradient row block by row block from the last, so that the ranges run
// down the buffer from its top, and computes the same gradient as without
// a listener.
func TestLinearParts(t *testing.T) {
	grads := func(listen bool) ([]float32, [][2]int) {
		b := NewBuilder()
		l := NewLinear(b.Scope("fc"), 600, 500, true)
		st := b.Build(3)
		m := NewSequential(st, l)
		var got [][2]int
		if listen {
			st.OnReadyRange(func(lo, hi int) { got = append(got, [2]int{lo, hi}) })
		}
		r := rand.New(rand.NewPCG(1, 2))
		x := make([]float32, 8*600)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		y := []int32{1, 7, 3, 499, 0, 5, 5, 2}
		if _, err := m.Forward(&Batch{N: 8, X: x, XDim: 600, Y: y}, true); err != nil {
			t.Fatal(err)
		}
		m.Backward(1)
		return append([]float32(nil), st.G...), got
	}
	want, _ := grads(false)
	got, ranges := grads(true)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("gradient %d is %g with parts, %g without", i, got[i], want[i])
		}
	}
	if len(ranges) < 3 {
		t.Fatalf("ranges %v: want the bias, then the weight in parts", ranges)
	}
	at := len(want)
	for _, r := range ranges {
		if r[1] != at || r[0] >= r[1] {
			t.Fatalf("ranges %v: want consecutive ranges down from %d", ranges, len(want))
		}
		at = r[0]
	}
	if at != 0 || ranges[0] != [2]int{600 * 500, len(want)} {
		t.Fatalf("ranges %v: want them to start with the bias and end at 0", ranges)
	}
}
