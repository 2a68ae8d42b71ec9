package compress

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestQSGDArgs(t *testing.T) {
	for _, c := range []struct {
		levels int
		ok     bool
	}{{1, true}, {8, true}, {127, true}, {0, false}, {-1, false}, {128, false}, {255, false}} {
		codec, err := NewQSGD(c.levels, 1)
		switch {
		case c.ok && err != nil:
			t.Errorf("NewQSGD(%d): %v", c.levels, err)
		case c.ok && codec.Name() != fmt.Sprintf("qsgd:%d", c.levels):
			t.Errorf("NewQSGD(%d).Name() = %q", c.levels, codec.Name())
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "want 1 to 127")):
			t.Errorf("NewQSGD(%d): err %v, want one naming the range 1 to 127", c.levels, err)
		}
	}
}

func TestEncodeQSGD(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name string
		s    int
		g    []float32
		want []byte
	}{
		{"empty", 4, nil, []byte{0, 0, 0, 0}},
		{"zeros", 4, []float32{0, -0}, []byte{0, 0, 0, 0, 0, 0}},
		{"one non-zero is the top level", 4, []float32{0, -2, 0}, []byte{0, 0, 0, 0x40, 0, 0x84, 0}},
		{"3-4-5 on whole levels", 5, []float32{-3, 4}, []byte{0, 0, 0xa0, 0x40, 0x83, 0x04}},
		{"NaN gives NaNScale", 4, []float32{1, nan}, []byte{0, 0, 0xc0, 0x7f, 0, 0}},
		{"Inf gives NaNScale", 4, []float32{float32(math.Inf(-1))}, []byte{0, 0, 0xc0, 0x7f, 0}},
		{"norm overflowing float32 gives NaNScale", 4, []float32{3e38, 3e38}, []byte{0, 0, 0xc0, 0x7f, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make([]byte, QSGDSize(len(c.g)))
			if err := EncodeQSGD(got, c.s, c.g, rand.NewPCG(1, 2)); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(c.want) {
				t.Fatalf("EncodeQSGD(%d levels, %v) = % x, want % x", c.s, c.g, got, c.want)
			}
		})
	}
	for _, s := range []int{0, 128} {
		if err := EncodeQSGD(make([]byte, 5), s, []float32{1}, rand.NewPCG(1, 2)); err == nil {
			t.Errorf("EncodeQSGD with %d levels: no error", s)
		}
	}
}

// TestQSGDUnbiased quantises a fixed vector many times and checks that
// the mean of the decoded vectors approaches it: within 6 standard
// errors of the stochastic rounding (each element's variance is at most
// (norm/s)²/4), which is a tenth of the bias that rounding to the
// nearest level or down would leave on this vector.
func TestQSGDUnbiased(t *testing.T) {
	const n, s, trials = 32, 4, 20000
	rng := rand.New(rand.NewPCG(11, 12))
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	mean := make([]float64, n)
	wire := make([]byte, QSGDSize(n))
	src := rand.NewPCG(13, 14)
	dec := make([]float32, n)
	for range trials {
		if err := EncodeQSGD(wire, s, g, src); err != nil {
			t.Fatal(err)
		}
		clear(dec)
		if err := AddQSGD(dec, wire, s); err != nil {
			t.Fatal(err)
		}
		for i, v := range dec {
			mean[i] += float64(v) / trials
		}
	}
	norm := float64(math.Float32frombits(uint32(wire[0]) | uint32(wire[1])<<8 | uint32(wire[2])<<16 | uint32(wire[3])<<24))
	bound := 6 * norm / s / 2 / math.Sqrt(trials)
	var worstBias float64 // of rounding down, the largest over elements
	for i, x := range g {
		v := math.Abs(float64(x)) / norm * s
		worstBias = max(worstBias, (v-math.Floor(v))*norm/s)
		if d := math.Abs(mean[i] - float64(x)); d > bound {
			t.Errorf("element %d: mean of %d quantisations %v, want %v within %v", i, trials, mean[i], x, bound)
		}
	}
	if bound > worstBias/10 {
		t.Fatalf("bound %v is too loose to catch rounding down's bias %v", bound, worstBias)
	}
}

// refQSGD is QSGD's quantisation written out plainly: 32 random bits an
// element, the low half of each 64-bit draw first.
type refQSGD struct {
	s    int
	seed uint64
}

func (r *refQSGD) contrib(rank, key int, step uint64, g []float32) []float32 {
	rng := qsgdRand(r.seed, rank, key, step)
	out := make([]float32, 0, len(g))
	for lo := 0; lo < len(g); lo += QSGDBlock {
		out = append(out, r.block(rng, g[lo:min(len(g), lo+QSGDBlock)])...)
	}
	return out
}

// block quantises one block of QSGDBlock elements (or the last, shorter).
func (r *refQSGD) block(rng *rand.PCG, g []float32) []float32 {
	var ss float64
	for _, x := range g {
		ss += float64(x) * float64(x)
	}
	norm := float64(float32(math.Sqrt(ss)))
	out := make([]float32, len(g))
	if norm == 0 {
		return out
	}
	var bits uint64
	for i, x := range g {
		if i%2 == 0 {
			bits = rng.Uint64()
		}
		u := float64(uint32(bits >> (32 * (i % 2))))
		v := math.Abs(float64(x)) * (float64(r.s) / norm)
		l := math.Floor(v)
		if u < (v-l)*(1<<32) {
			l++
		}
		out[i] = float32(norm * min(l, float64(r.s)) / float64(r.s))
		if x < 0 {
			out[i] = -out[i]
		}
	}
	return out
}

func TestQSGDRanks(t *testing.T) {
	for _, s := range []int{1, 8, 127} {
		for _, p := range []int{2, 4} {
			t.Run(fmt.Sprintf("levels=%d/p=%d", s, p), func(t *testing.T) {
				checkRanks(t, p, func() (Codec, error) { return NewQSGD(s, 99) },
					func() refCodec { return &refQSGD{s, 99} },
					func(n, _ int) int64 { return int64(qsgdBlocksSize(n)) })
			})
		}
	}
}

// BenchmarkQSGDEncode quantises a 16M bucket, whose elements are almost
// all below the first level, and a 4K one, whose levels spread out.
func BenchmarkQSGDEncode(b *testing.B) {
	for _, c := range []struct{ n, s int }{{16 << 20, 8}, {4 << 10, 127}} {
		b.Run(fmt.Sprintf("n=%d/levels=%d", c.n, c.s), func(b *testing.B) {
			p := benchGrad(c.n)
			dst := make([]byte, QSGDSize(len(p)))
			src := rand.NewPCG(1, 2)
			b.SetBytes(4 * int64(len(p)))
			for b.Loop() {
				EncodeQSGD(dst, c.s, p, src)
			}
		})
	}
}

func BenchmarkQSGDDecode(b *testing.B) {
	p := benchGrad(16 << 20)
	wire := make([]byte, QSGDSize(len(p)))
	EncodeQSGD(wire, 8, p, rand.NewPCG(1, 2))
	b.SetBytes(4 * int64(len(p)))
	for b.Loop() {
		if err := AddQSGD(p, wire, 8); err != nil {
			b.Fatal(err)
		}
	}
}
