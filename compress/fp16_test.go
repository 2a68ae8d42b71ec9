package compress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// narrowCodecs are the codecs of fp16.go with their unit roundoff u:
// one rounding to the format is off by at most u times the value.
var narrowCodecs = []struct {
	name string
	new  func() Codec
	u    float64
	min  float64 // the format's smallest subnormal: its absolute error floor
}{
	{"fp16", NewFP16, 0x1p-11, 0x1p-24},
	{"bf16", NewBF16, 0x1p-8, 0x1p-133},
}

// rankInput is rank's gradient in the codec tests, the same on every
// rank's call, so that each can compute every rank's.
func rankInput(rank, n int, ints bool) []float32 {
	r := rand.New(rand.NewPCG(uint64(rank), uint64(n)))
	buf := make([]float32, n)
	for i := range buf {
		if ints {
			buf[i] = float32(r.IntN(65) - 32) // sums of up to 4 are exact in both formats
		} else {
			buf[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(16)-8)))
		}
	}
	return buf
}

// Every rank ends with the same buffer: the sum of the ranks' inputs,
// exact where the inputs and sums are representable, else within the
// rounding bound n·u·Σ|x|: one rounding of each input and n-1 of
// partial sums, each off by at most u times a value no larger than
// Σ|x| (plus n subnormal quanta near zero).
func TestFP16BF16Codecs(t *testing.T) {
	for _, codec := range narrowCodecs {
		for _, ranks := range []int{2, 4} {
			for _, n := range []int{0, 1, 37, 1000, 4099} {
				for _, ints := range []bool{false, true} {
					name := fmt.Sprintf("%s/ranks=%d/n=%d/ints=%v", codec.name, ranks, n, ints)
					t.Run(name, func(t *testing.T) {
						testNarrow(t, codec.new, codec.name, ranks, n, ints, codec.u, codec.min)
					})
				}
			}
		}
	}
}

func testNarrow(t *testing.T, newCodec func() Codec, name string, ranks, n int, ints bool, u, minQ float64) {
	out := make([][]float32, ranks)
	stats := make([]Stats, ranks)
	spmdtest.Run(t, ranks, func(ctx context.Context, w *spmd.World) error {
		c := newCodec()
		if c.Name() != name {
			return fmt.Errorf("Name() = %q, want %q", c.Name(), name)
		}
		r := w.Comm.Rank()
		buf := rankInput(r, n, ints)
		var err error
		// Twice with the same codec: the scratch buffer is reused.
		for range 2 {
			buf = rankInput(r, n, ints)
			if stats[r], err = c.AllReduce(ctx, w.Comm, 7, buf, []Segment{{Off: 0, Rows: 1, Cols: n}}); err != nil {
				return err
			}
		}
		out[r] = buf
		return nil
	})
	if t.Failed() {
		return
	}
	for r := range ranks {
		if want := (Stats{Raw: 4 * int64(n), Sent: 2 * int64(n)}); stats[r] != want {
			t.Errorf("rank %d: stats %+v, want %+v", r, stats[r], want)
		}
		for i := range out[r] {
			if math.Float32bits(out[r][i]) != math.Float32bits(out[0][i]) {
				t.Fatalf("element %d: rank %d has %g, rank 0 %g", i, r, out[r][i], out[0][i])
			}
		}
	}
	inputs := make([][]float32, ranks)
	for r := range inputs {
		inputs[r] = rankInput(r, n, ints)
	}
	for i, got := range out[0] {
		var sum, abs float64
		for r := range inputs {
			sum += float64(inputs[r][i])
			abs += math.Abs(float64(inputs[r][i]))
		}
		bound := float64(ranks)*u*abs*(1+1e-6) + float64(ranks)*minQ
		if ints {
			bound = 0
		}
		if d := math.Abs(float64(got) - sum); !(d <= bound) {
			t.Fatalf("element %d: %g, sum of the inputs %g: off by %g, bound %g", i, got, sum, d, bound)
		}
	}
}

// fp16 overflows where bf16 does not: a sum of 65520 or more is +Inf, and
// so is an input of 70000 (with no error). Stats.Saturated counts the
// elements finite in the rank's input that came out infinite, in the
// all-reduce and in the reduce-scatter.
func TestFP16CodecOverflowsToInf(t *testing.T) {
	inf := float32(math.Inf(1))
	bf := func(x float32) float32 { return FromBF16(ToBF16(x)) }
	for _, c := range []struct {
		name string
		new  func() Codec
		want []float32
		// Saturated of each rank: all-reduce, then reduce-scatter (its
		// blocks are elements 0-2 and 3-4).
		sat, satRS [2]int64
	}{
		// Rank 0 counts elements 0, 2 and 4, rank 1 also 3, whose +Inf
		// was rank 0's input.
		{"fp16", NewFP16, []float32{inf, 2, inf, inf, -inf}, [2]int64{3, 4}, [2]int64{2, 2}},
		// 2 x 39936 (40000 to 8 significant bits); 70000 to bf16 is 70144,
		// and 70144 + 1 rounds back to it; 2 x -1e38 is finite.
		{"bf16", NewBF16, []float32{79872, 2, 70144, inf, bf(2 * bf(-1e38))}, [2]int64{0, 1}, [2]int64{0, 1}},
	} {
		spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
			r := w.Rank()
			in := [][]float32{{40000, 1, 70000, inf, -1e38}, {40000, 1, 1, 1, -1e38}}[r]
			buf := slices.Clone(in)
			st, err := c.new().AllReduce(ctx, w.Comm, 0, buf, nil)
			if err != nil {
				return err
			}
			if !slices.Equal(buf, c.want) || st.Saturated != c.sat[r] {
				return fmt.Errorf("%s all-reduce: got %v, %d saturated, want %v, %d", c.name, buf, st.Saturated, c.want, c.sat[r])
			}
			lo, hi := prims.Block(len(in), 2, r)
			recv := make([]float32, hi-lo)
			st, err = c.new().(ReduceScatterer).ReduceScatter(ctx, w.Comm, 0, in, recv, nil)
			if err != nil {
				return err
			}
			if !slices.Equal(recv, c.want[lo:hi]) || st.Saturated != c.satRS[r] {
				return fmt.Errorf("%s reduce-scatter: got %v, %d saturated, want %v, %d", c.name, recv, st.Saturated, c.want[lo:hi], c.satRS[r])
			}
			return nil
		})
	}
}

// A failed all-reduce says which codec and bucket, wraps the cause, and
// leaves buf alone.
func TestFP16CodecError(t *testing.T) {
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		buf := []float32{1.5, -2}
		_, err := NewFP16().AllReduce(ctx, w.Comm, 3, buf, nil)
		if !errors.Is(err, context.Canceled) {
			return fmt.Errorf("AllReduce on a canceled context: %v, want context.Canceled", err)
		}
		if buf[0] != 1.5 || buf[1] != -2 {
			return fmt.Errorf("a failed AllReduce changed buf to %v", buf)
		}
		return nil
	})
}

// benchN is the benchmarks' number of elements: 64 MiB of float32, more
// than any cache, so they measure memory speed.
const benchN = 16 << 20

func benchFloats() []float32 {
	r := rand.New(rand.NewPCG(5, 6))
	f := make([]float32, benchN)
	for i := range f {
		f[i] = float32(r.NormFloat64())
	}
	return f
}

// benchEncode runs enc (the exported function, kernel and all) and encGo
// (the Go loop) on 16M elements; the bytes are the float32 input's.
func benchEncode(b *testing.B, enc, encGo func([]uint16, []float32)) {
	src, dst := benchFloats(), make([]uint16, benchN)
	encGo(dst, src) // fault dst's pages in before timing
	for _, k := range []struct {
		name string
		f    func([]uint16, []float32)
	}{{"kernel", enc}, {"go", encGo}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(4 * benchN)
			for b.Loop() {
				k.f(dst, src)
			}
		})
	}
}

// benchDecode is benchEncode for the decoders; the bytes are the float32
// output's.
func benchDecode(b *testing.B, enc func([]uint16, []float32), dec, decGo func([]float32, []uint16)) {
	wide, src := benchFloats(), make([]uint16, benchN)
	enc(src, wide)
	for _, k := range []struct {
		name string
		f    func([]float32, []uint16)
	}{{"kernel", dec}, {"go", decGo}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(4 * benchN)
			for b.Loop() {
				k.f(wide, src)
			}
		})
	}
}

func BenchmarkEncodeF16(b *testing.B)  { benchEncode(b, EncodeF16, encodeF16) }
func BenchmarkEncodeBF16(b *testing.B) { benchEncode(b, EncodeBF16, encodeBF16) }
func BenchmarkDecodeF16(b *testing.B)  { benchDecode(b, EncodeF16, DecodeF16, decodeF16) }
func BenchmarkDecodeBF16(b *testing.B) { benchDecode(b, EncodeBF16, DecodeBF16, decodeBF16) }

// BenchmarkAddF16 and BenchmarkAddBF16 time the all-reduce's reduction;
// the bytes are the float32 values it sums (4 per element).
func BenchmarkAddF16(b *testing.B)  { benchAdd(b, EncodeF16, AddF16, addF16) }
func BenchmarkAddBF16(b *testing.B) { benchAdd(b, EncodeBF16, AddBF16, addBF16) }

func benchAdd(b *testing.B, enc func([]uint16, []float32), add, addGo func(dst, src []uint16)) {
	wide, dst, src := benchFloats(), make([]uint16, benchN), make([]uint16, benchN)
	enc(src, wide)
	for _, k := range []struct {
		name string
		f    func(dst, src []uint16)
	}{{"kernel", add}, {"go", addGo}} {
		b.Run(k.name, func(b *testing.B) {
			enc(dst, wide)
			b.SetBytes(4 * benchN)
			for b.Loop() {
				k.f(dst, src)
			}
		})
	}
}

// The 16-bit reduce-scatter leaves each rank its block (prims.Block's cut,
// uneven lengths included) of the same sum the all-reduce makes, within
// the same rounding bound (exact on small integers), leaves buf alone,
// and refuses a recv of the wrong length.
func TestFP16BF16ReduceScatter(t *testing.T) {
	for _, codec := range narrowCodecs {
		for _, ranks := range []int{2, 3, 4} {
			for _, n := range []int{0, 5, 1000, 4099} {
				for _, ints := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/ranks=%d/n=%d/ints=%v", codec.name, ranks, n, ints), func(t *testing.T) {
						spmdtest.Run(t, ranks, func(ctx context.Context, w *spmd.World) error {
							rs := codec.new().(ReduceScatterer)
							r := w.Comm.Rank()
							buf := rankInput(r, n, ints)
							lo, hi := prims.Block(n, ranks, r)
							recv := make([]float32, hi-lo)
							st, err := rs.ReduceScatter(ctx, w.Comm, 3, buf, recv, nil)
							if err != nil {
								return err
							}
							if want := (Stats{Raw: 4 * int64(n), Sent: 2 * int64(n)}); st != want {
								return fmt.Errorf("stats %+v, want %+v", st, want)
							}
							for i, x := range rankInput(r, n, ints) {
								if math.Float32bits(buf[i]) != math.Float32bits(x) {
									return fmt.Errorf("buf[%d] changed from %g to %g", i, x, buf[i])
								}
							}
							inputs := make([][]float32, ranks)
							for q := range inputs {
								inputs[q] = rankInput(q, n, ints)
							}
							for i, got := range recv {
								var sum, abs float64
								for q := range ranks {
									x := float64(inputs[q][lo+i])
									sum, abs = sum+x, abs+math.Abs(x)
								}
								bound := float64(ranks)*codec.u*abs*(1+1e-6) + float64(ranks)*codec.min
								if ints {
									bound = 0
								}
								if d := math.Abs(float64(got) - sum); !(d <= bound) {
									return fmt.Errorf("element %d: %g, sum %g: off by %g, bound %g", lo+i, got, sum, d, bound)
								}
							}
							if _, err := rs.ReduceScatter(ctx, w.Comm, 3, buf, make([]float32, hi-lo+1), nil); err == nil {
								return fmt.Errorf("a recv one element too long was taken")
							}
							return nil
						})
					})
				}
			}
		}
	}
}
