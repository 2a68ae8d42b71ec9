package compress

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

func TestTopKSelect(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	tiny := math.Float32frombits(1) // the smallest subnormal
	for _, c := range []struct {
		name       string
		p          []float32
		k          int
		want       []uint32
		wantFinite bool
	}{
		{"k = 1 picks the largest magnitude", []float32{1, -5, 3, 4}, 1, []uint32{1}, true},
		{"k = n picks all", []float32{1, -5, 0, 4}, 4, []uint32{0, 1, 2, 3}, true},
		{"n = 1", []float32{-0}, 1, []uint32{0}, true},
		{"indices come out increasing", []float32{9, 1, 8, 2, 7}, 3, []uint32{0, 2, 4}, true},
		{"all equal: lowest indices", []float32{2, 2, 2, 2, 2, 2}, 3, []uint32{0, 1, 2}, true},
		{"equal magnitudes, either sign: lowest indices", []float32{-2, 2, -2, 2}, 2, []uint32{0, 1}, true},
		{"ties at the k-th only", []float32{1, 5, 3, 3, 9, 3}, 3, []uint32{1, 2, 4}, true},
		{"all zeros, some negative", []float32{0, -0, 0, -0}, 2, []uint32{0, 1}, true},
		{"subnormals above zero", []float32{0, tiny, -0, -tiny}, 2, []uint32{1, 3}, true},
		{"neighbours in the last bit", []float32{1, math.Nextafter32(1, 2), 1, math.Nextafter32(1, 0)}, 2, []uint32{0, 1}, true},
		{"Inf above numbers", []float32{1e38, -inf, 3}, 1, []uint32{1}, false},
		{"NaN above Inf", []float32{inf, 1, nan, -inf}, 2, []uint32{0, 2}, false},
		{"NaN not chosen still not finite", []float32{nan, 1, nan}, 3, []uint32{0, 1, 2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s selector
			got, finite := s.top(c.p, c.k, nil)
			if !slices.Equal(got, c.want) || finite != c.wantFinite {
				t.Fatalf("top %d of %v = %v, finite %v; want %v, %v", c.k, c.p, got, finite, c.want, c.wantFinite)
			}
		})
	}
}

// TestTopKSelectMatchesSort checks the radix select against a stable
// sort by magnitude, on vectors with many ties, spread exponents, and
// bins of the first and second radix levels that hold most elements.
func TestTopKSelectMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	gens := map[string]func() float32{
		"ties":     func() float32 { return float32(rng.IntN(7) - 3) },
		"normal":   func() float32 { return float32(rng.NormFloat64()) },
		"spread":   func() float32 { return float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(80)-40))) },
		"one bin":  func() float32 { return math.Float32frombits(0x3f800000 | rng.Uint32()&0xfffff) },
		"low bits": func() float32 { return math.Float32frombits(0x3f800000 | rng.Uint32()&0x3ff) },
		"specials": func() float32 {
			return []float32{float32(math.NaN()), float32(math.Inf(-1)), 0, 1, -1, 2}[rng.IntN(6)]
		},
	}
	var s selector
	for name, gen := range gens {
		for _, n := range []int{1, 2, 17, 1000, 5000} {
			p := make([]float32, n)
			for i := range p {
				p[i] = gen()
			}
			for _, k := range []int{1, 2, n / 3, n - 1, n} {
				if k < 1 || k > n {
					continue
				}
				got, _ := s.top(p, k, nil)
				if want := sortTop(p, k); !slices.Equal(got, want) {
					t.Fatalf("%s, n %d, k %d: got %v, want %v", name, n, k, got, want)
				}
			}
		}
	}
}

// sortTop is the indices of the k elements of largest magnitude, ties to
// the lower index, NaNs first, by a stable sort, in increasing order.
func sortTop(p []float32, k int) []uint32 {
	idx := make([]uint32, len(p))
	for i := range idx {
		idx[i] = uint32(i)
	}
	mag := func(i uint32) uint32 { return math.Float32bits(p[i]) &^ (1 << 31) }
	slices.SortStableFunc(idx, func(a, b uint32) int {
		ma, mb := mag(a), mag(b)
		if ma == mb {
			return 0
		}
		if ma > mb {
			return -1
		}
		return 1
	})
	idx = idx[:k]
	slices.Sort(idx)
	return idx
}

func TestTopKCount(t *testing.T) {
	for _, c := range []struct {
		frac float64
		n    int
		want int
	}{
		{0.01, 100, 1}, {0.07, 100, 7}, {0.01, 1, 1}, {0.001, 10, 1}, {0.5, 3, 2},
		{1, 5, 5}, {0.3, 10, 3}, {0.01, 16 << 20, 167773}, {1e-9, 1000, 1},
	} {
		if got := kOf(c.frac, c.n); got != c.want {
			t.Errorf("kOf(%v, %d) = %d, want %d", c.frac, c.n, got, c.want)
		}
	}
}

func TestTopKRandomKArgs(t *testing.T) {
	for _, c := range []struct {
		frac     float64
		wantName string // "" if the fraction is refused
	}{
		{0.01, "0.01"}, {1, "1"}, {0.25, "0.25"}, {1e-5, "1e-05"},
		{0, ""}, {-0.1, ""}, {1.5, ""}, {math.NaN(), ""}, {math.Inf(1), ""},
	} {
		for prefix, mk := range map[string]func(float64) (Codec, error){
			"topk":  NewTopK,
			"randk": func(f float64) (Codec, error) { return NewRandomK(f, 1) },
		} {
			codec, err := mk(c.frac)
			if c.wantName == "" {
				if err == nil || !strings.Contains(err.Error(), "(0, 1]") {
					t.Errorf("%s(%v): err %v, want one naming the range (0, 1]", prefix, c.frac, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s(%v): %v", prefix, c.frac, err)
			}
			if got, want := codec.Name(), prefix+":"+c.wantName; got != want {
				t.Errorf("Name = %q, want %q", got, want)
			}
		}
	}
}

// TestRandomKSample checks that random-k's indices are k, distinct, increasing,
// below n, leave the set zero, and are drawn evenly: each index of 10
// about as often over many draws.
func TestRandomKSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ n, k int }{{1, 1}, {10, 1}, {10, 10}, {64, 63}, {200, 37}, {1000, 999}} {
		seen := make([]uint64, (c.n+63)/64)
		idx := sampleK(rng, c.n, c.k, seen, nil)
		ok := len(idx) == c.k && int(idx[len(idx)-1]) < c.n
		for i := 1; ok && i < len(idx); i++ {
			ok = idx[i] > idx[i-1]
		}
		if !ok {
			t.Fatalf("n %d, k %d: indices %v", c.n, c.k, idx)
		}
		for _, w := range seen {
			if w != 0 {
				t.Fatalf("n %d, k %d: set left non-zero", c.n, c.k)
			}
		}
	}
	const n, k, draws = 10, 3, 30000
	var hits [n]int
	seen := make([]uint64, 1)
	for range draws {
		for _, i := range sampleK(rng, n, k, seen, nil) {
			hits[i]++
		}
	}
	want := float64(draws * k / n) // 9000, sd about 80
	for i, h := range hits {
		if math.Abs(float64(h)-want) > 500 {
			t.Errorf("index %d drawn %d times, want about %v", i, h, want)
		}
	}
}

// refTopK is top-k by a sort, with its own residuals.
type refTopK struct {
	frac float64
	res  map[int][]float32
}

func (r *refTopK) contrib(_, key int, _ uint64, g []float32) []float32 {
	p := addResidual(r.res, key, g)
	out := make([]float32, len(p))
	for _, i := range sortTop(p, kOf(r.frac, len(p))) {
		out[i], r.res[key][i] = p[i], 0
	}
	return out
}

// refRandomK is random-k with Floyd's algorithm on a map.
type refRandomK struct {
	frac float64
	seed uint64
	res  map[int][]float32
}

func (r *refRandomK) contrib(_, key int, step uint64, g []float32) []float32 {
	p := addResidual(r.res, key, g)
	n, k := len(p), kOf(r.frac, len(p))
	rng := randkRand(r.seed, key, step)
	set := map[int]bool{}
	for j := n - k; j < n; j++ {
		t := int(rng.Uint64N(uint64(j) + 1))
		if set[t] {
			t = j
		}
		set[t] = true
	}
	out := make([]float32, n)
	for i := range set {
		out[i], r.res[key][i] = p[i], 0
	}
	return out
}

// addResidual returns p = g + key's residual in res, and sets the
// residual to p.
func addResidual(res map[int][]float32, key int, g []float32) []float32 {
	r := res[key]
	if r == nil {
		r = make([]float32, len(g))
	}
	p := make([]float32, len(g))
	for i := range p {
		p[i] = g[i] + r[i]
	}
	res[key] = slices.Clone(p)
	return p
}

func TestTopKRanks(t *testing.T) {
	for _, frac := range []float64{0.01, 0.1, 0.3, 0.5} {
		for _, p := range []int{2, 4} {
			t.Run(fmt.Sprintf("frac=%v/p=%d", frac, p), func(t *testing.T) {
				checkRanks(t, p, func() (Codec, error) { return NewTopK(frac) },
					func() refCodec { return &refTopK{frac, map[int][]float32{}} },
					func(n, p int) int64 {
						if k := kOf(frac, n); p*k < n {
							return 8 * int64(k)
						}
						return 4 * int64(n)
					})
			})
		}
	}
}

func TestRandomKRanks(t *testing.T) {
	for _, frac := range []float64{0.01, 0.3, 1} {
		for _, p := range []int{2, 4} {
			t.Run(fmt.Sprintf("frac=%v/p=%d", frac, p), func(t *testing.T) {
				checkRanks(t, p, func() (Codec, error) { return NewRandomK(frac, 42) },
					func() refCodec { return &refRandomK{frac, 42, map[int][]float32{}} },
					func(n, _ int) int64 { return 4 * int64(kOf(frac, n)) })
			})
		}
	}
}

// TestTopKSentIsK checks, on one rank, that top-k sends k elements
// (the bucket it returns has k non-zeros for a gradient without zeros)
// and that an empty bucket is a no-op.
func TestTopKSentIsK(t *testing.T) {
	spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
		codec, _ := NewTopK(0.05)
		buf := make([]float32, 1000)
		for i := range buf {
			buf[i] = float32(i%97) + 0.5
		}
		st, err := codec.AllReduce(ctx, w.Comm, 0, buf, nil)
		if err != nil {
			return err
		}
		if nz := len(buf) - countZeros(buf); nz != 50 || st.Sent != 400 || st.Raw != 4000 {
			return fmt.Errorf("sent %d non-zeros, stats %+v; want 50, {4000 400}", nz, st)
		}
		if st, err := codec.AllReduce(ctx, w.Comm, 1, nil, nil); err != nil || st != (Stats{}) {
			return fmt.Errorf("empty bucket: %+v, %v", st, err)
		}
		return nil
	})
}

func countZeros(p []float32) int {
	n := 0
	for _, x := range p {
		if x == 0 {
			n++
		}
	}
	return n
}

// BenchmarkTopKSelect is the selection of 1% of 16M normal numbers.
func BenchmarkTopKSelect(b *testing.B) {
	p := benchGrad(16 << 20)
	k := kOf(0.01, len(p))
	var s selector
	idx := make([]uint32, 0, k)
	b.SetBytes(4 * int64(len(p)))
	for b.Loop() {
		idx, _ = s.top(p, k, idx[:0])
	}
}

// BenchmarkTopK is the codec topk:0.01 on one rank and a 16M bucket:
// error feedback, selection, encoding and decoding. After a step, the
// bucket and residual add up to the same p again.
func BenchmarkTopK(b *testing.B) {
	benchCodec(b, func() (Codec, error) { return NewTopK(0.01) })
}

// BenchmarkRandomK is randk:0.01 on one rank and a 16M bucket.
func BenchmarkRandomK(b *testing.B) {
	benchCodec(b, func() (Codec, error) { return NewRandomK(0.01, 1) })
}

// benchCodec runs a codec on one rank over a bucket of 16M normal
// numbers.
func benchCodec(b *testing.B, newCodec func() (Codec, error)) {
	buf := benchGrad(16 << 20)
	b.SetBytes(4 * int64(len(buf)))
	spmdtest.Run(b, 1, func(ctx context.Context, w *spmd.World) error {
		codec, err := newCodec()
		if err != nil {
			return err
		}
		for b.Loop() {
			if _, err := codec.AllReduce(ctx, w.Comm, 0, buf, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchGrad is n normal numbers.
func benchGrad(n int) []float32 {
	rng := rand.New(rand.NewPCG(1, 1))
	p := make([]float32, n)
	for i := range p {
		p[i] = float32(rng.NormFloat64())
	}
	return p
}
