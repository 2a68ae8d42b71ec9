package compress

import (
	"encoding/binary"
	"flag"
	"math"
	"math/rand/v2"
	"testing"
)

var exhaustive = flag.Bool("f16.exhaustive", false, "check ToF16 and the kernels on all 2^32 float32 bit patterns (about 30 s)")

// refToF16 is ToF16 the slow way, in float64 arithmetic: find the
// binade of |f|, divide by its binary16 quantum, round to even, and
// assemble the bits. NaNs follow the hardware's rule (sign, quiet bit,
// top 10 payload bits), which is a choice, not arithmetic.
func refToF16(f float32) F16 {
	x := float64(f)
	var sign F16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	switch {
	case math.IsNaN(x):
		return sign | 0x7e00 | F16(math.Float32bits(f)>>13)&0x3ff
	case x >= 65520:
		return sign | 0x7c00
	}
	exp := -14 // the binade [2^exp, 2^(exp+1)); below 2^-14 the subnormals'
	if x >= 0x1p-14 {
		_, e := math.Frexp(x)
		exp = e - 1
	}
	q := math.Ldexp(1, exp-10) // the quantum: 2^-10 of the binade
	k := math.RoundToEven(x / q)
	if exp == -14 && k < 1024 {
		return sign | F16(k) // subnormal or zero
	}
	if k == 2048 { // rounded up into the next binade
		k, exp = 1024, exp+1
	}
	return sign | F16(exp+15)<<10 | F16(k-1024)
}

// refFromF16 is FromF16 the slow way.
func refFromF16(h F16) float32 {
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	var x float64
	switch {
	case e == 0x1f && m != 0:
		return math.Float32frombits(uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(m)<<13)
	case e == 0x1f:
		x = math.Inf(1)
	case e == 0:
		x = math.Ldexp(m, -24)
	default:
		x = math.Ldexp(1024+m, e-25)
	}
	if h&0x8000 != 0 {
		x = -x
	}
	return float32(x)
}

func isNaN16(h F16) bool { return h&0x7fff > 0x7c00 }

// Every binary16 widens to the float32 of its value and rounds back to
// itself (a NaN to a quiet NaN of the same sign and payload), through
// the scalar functions, the Go loops and the kernels alike.
func TestF16RoundTripsAllPatterns(t *testing.T) {
	all := make([]F16, 1<<16)
	for h := range all {
		all[h] = F16(h)
	}
	wide, wideGo := make([]float32, len(all)), make([]float32, len(all))
	DecodeF16(wide, all)
	decodeF16(wideGo, all)
	back, backGo := make([]F16, len(all)), make([]F16, len(all))
	EncodeF16(back, wide)
	encodeF16(backGo, wideGo)
	for i, h := range all {
		f := FromF16(h)
		fb, rb := math.Float32bits(f), math.Float32bits(refFromF16(h))
		if fb != rb || math.Float32bits(wide[i]) != fb || math.Float32bits(wideGo[i]) != fb {
			t.Fatalf("%#04x widens to %#08x, reference %#08x, kernel %#08x, Go loop %#08x",
				h, fb, rb, math.Float32bits(wide[i]), math.Float32bits(wideGo[i]))
		}
		want := h
		if isNaN16(h) {
			want |= 0x0200 // quieted
		}
		if got := ToF16(f); got != want || back[i] != want || backGo[i] != want {
			t.Fatalf("%#04x -> %g -> %#04x (kernel %#04x, Go loop %#04x), want %#04x", h, f, got, back[i], backGo[i], want)
		}
	}
}

func TestToF16Rounding(t *testing.T) {
	for _, c := range []struct {
		name string
		in   float32
		want F16
	}{
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"exact fraction", 0.333251953125, 0x3555},
		{"below half an ulp rounds down", 1 + 0x1p-11 - 0x1p-23, 0x3c00},
		{"above half an ulp rounds up", 1 + 0x1p-11 + 0x1p-23, 0x3c01},
		{"tie to even stays", 1 + 0x1p-11, 0x3c00},
		{"tie to even goes up", 1 + 3*0x1p-11, 0x3c02},
		{"negative tie to even", -(1 + 3*0x1p-11), 0xbc02},
		{"carry into the exponent", 2 - 0x1p-12, 0x4000},
		{"largest finite", 65504, 0x7bff},
		{"just below the Inf threshold", 65519.996, 0x7bff},
		{"first value to round to Inf", 65520, 0x7c00},
		{"negative overflow", -65520, 0xfc00},
		{"float32 max", math.MaxFloat32, 0x7c00},
		{"+Inf", float32(math.Inf(1)), 0x7c00},
		{"-Inf", float32(math.Inf(-1)), 0xfc00},
		{"smallest normal", 0x1p-14, 0x0400},
		{"largest subnormal", 0x3ffp-24, 0x03ff},
		{"subnormal rounds up to the smallest normal", 0x3ff.8p-24, 0x0400},
		{"subnormal tie to even stays", 0x2.8p-24, 0x0002},
		{"subnormal tie to even goes up", 0x3.8p-24, 0x0004},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half the smallest subnormal ties to zero", 0x1p-25, 0x0000},
		{"just above half the smallest subnormal", math.Nextafter32(0x1p-25, 1), 0x0001},
		{"negative half the smallest subnormal", -0x1p-25, 0x8000},
		{"a quarter of the smallest subnormal", 0x1p-26, 0x0000},
		{"float32 subnormal", math.SmallestNonzeroFloat32, 0x0000},
		{"zero", 0, 0x0000},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"quiet NaN", math.Float32frombits(0x7fc00000), 0x7e00},
		{"negative NaN", math.Float32frombits(0xffc00000), 0xfe00},
		{"signalling NaN is quieted, payload kept", math.Float32frombits(0x7f802000), 0x7e01},
		{"NaN with only low payload stays NaN", math.Float32frombits(0x7f800001), 0x7e00},
	} {
		in := []float32{c.in}
		kernel := make([]F16, kernelBlock)
		EncodeF16(kernel, make([]float32, kernelBlock)) // zeros, then c.in as the block's first
		EncodeF16(kernel, append(in, make([]float32, kernelBlock-1)...))
		if got, ref := ToF16(c.in), refToF16(c.in); got != c.want || ref != c.want || kernel[0] != c.want {
			t.Errorf("%s: ToF16(%g, bits %#08x) = %#04x, reference %#04x, kernel %#04x, want %#04x",
				c.name, c.in, math.Float32bits(c.in), got, ref, kernel[0], c.want)
		}
	}
}

// randFloat32 draws a float32 bit pattern: half of them uniform over all
// 2^32 (mostly far outside binary16's range), half with an exponent near
// binary16's (2^-27 to 2^17), where the rounding cases are.
func randFloat32(r *rand.Rand) float32 {
	u := r.Uint32()
	if u&1 == 0 {
		u = u&0x807fffff | (100+r.Uint32N(45))<<23
	}
	return math.Float32frombits(u)
}

func TestToF16MatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 4 << 20 {
		f := randFloat32(r)
		if got, want := ToF16(f), refToF16(f); got != want {
			t.Fatalf("ToF16(%g, bits %#08x) = %#04x, reference %#04x", f, math.Float32bits(f), got, want)
		}
	}
}

// TestF16Exhaustive checks ToF16 against the reference, and the kernels
// against ToF16, on every float32; run it with -f16.exhaustive.
func TestF16Exhaustive(t *testing.T) {
	if !*exhaustive {
		t.Skip("takes about 30 s: run with -f16.exhaustive")
	}
	const chunk = 1 << 16
	src, dst := make([]float32, chunk), make([]F16, chunk)
	for hi := uint32(0); hi < 1<<16; hi++ {
		for i := range src {
			src[i] = math.Float32frombits(hi<<16 | uint32(i))
		}
		EncodeF16(dst, src)
		for i, f := range src {
			if want := refToF16(f); ToF16(f) != want || dst[i] != want {
				t.Fatalf("bits %#08x: ToF16 %#04x, kernel %#04x, reference %#04x", math.Float32bits(f), ToF16(f), dst[i], want)
			}
		}
	}
}

// The kernels (F16C, AVX2) give the Go loops' results bit for bit, on
// slices of every kind of value and of lengths that leave tails.
func TestHalfKernelsMatchGo(t *testing.T) {
	if !haveF16C || !haveAVX2 {
		t.Logf("no F16C or AVX2 kernels here (F16C %v, AVX2 %v: purego build, another GOARCH or an older CPU): the exported functions are the Go loops", haveF16C, haveAVX2)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 31, 32, 33, 63, 64, 65, 95, 257, 1000, 4099} {
		f := make([]float32, n)
		h, h2 := make([]uint16, n), make([]uint16, n)
		for i := range f {
			f[i] = randFloat32(r)
			h[i], h2[i] = uint16(r.Uint32()), uint16(r.Uint32())
		}
		for _, k := range []struct {
			name       string
			enc, encGo func([]uint16, []float32)
			dec, decGo func([]float32, []uint16)
			add, addGo func(dst, src []uint16)
			acc, accGo func([]uint16, []float32)
			isNaN      func(uint16) bool
		}{
			{"fp16", EncodeF16, encodeF16, DecodeF16, decodeF16, AddF16, addF16, AccumulateF16, accumulateF16, isNaN16},
			{"bf16", EncodeBF16, encodeBF16, DecodeBF16, decodeBF16, AddBF16, addBF16, AccumulateBF16, accumulateBF16,
				func(h uint16) bool { return h&0x7fff > 0x7f80 }},
		} {
			got, want := make([]uint16, n), make([]uint16, n)
			k.enc(got, f)
			k.encGo(want, f)
			same16(t, k.name+" encode", n, got, want, nil)

			gotF, wantF := make([]float32, n), make([]float32, n)
			k.dec(gotF, h)
			k.decGo(wantF, h)
			for i := range gotF {
				if math.Float32bits(gotF[i]) != math.Float32bits(wantF[i]) {
					t.Fatalf("%s decode, length %d, element %d (%#04x): kernel %#08x, Go loop %#08x",
						k.name, n, i, h[i], math.Float32bits(gotF[i]), math.Float32bits(wantF[i]))
				}
			}

			copy(got, h)
			copy(want, h)
			k.add(got, h2)
			k.addGo(want, h2)
			same16(t, k.name+" add", n, got, want, k.isNaN)

			copy(got, h)
			copy(want, h)
			k.acc(got, f)
			k.accGo(want, f)
			same16(t, k.name+" accumulate", n, got, want, k.isNaN)
		}
	}
}

// same16 fails t unless got and want are equal, but for elements where
// both are NaN if isNaN is given: the NaN a float32 sum makes is the
// CPU's to choose.
func same16(t *testing.T, what string, n int, got, want []uint16, isNaN func(uint16) bool) {
	t.Helper()
	for i := range got {
		if got[i] != want[i] && (isNaN == nil || !isNaN(got[i]) || !isNaN(want[i])) {
			t.Fatalf("%s, length %d, element %d: kernel %#04x, Go loop %#04x", what, n, i, got[i], want[i])
		}
	}
}

// FuzzF16 converts arbitrary bit patterns both ways, by the scalar
// functions and by the slice ones (kernels and tails): nothing panics,
// ToF16 agrees with the reference, and every binary16 but a NaN
// round-trips exactly.
func FuzzF16(f *testing.F) {
	f.Add([]byte{0x00, 0x00, 0x80, 0x3f})
	f.Add([]byte{0x00, 0xf0, 0x7f, 0x47, 0x01, 0x7c})
	f.Add(make([]byte, 4*kernelBlock+6))
	f.Fuzz(func(t *testing.T, data []byte) {
		src := make([]float32, len(data)/4)
		for i := range src {
			src[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		enc := make([]F16, len(src))
		EncodeF16(enc, src)
		for i, x := range src {
			if want := refToF16(x); enc[i] != want || ToF16(x) != want {
				t.Fatalf("bits %#08x: kernel %#04x, ToF16 %#04x, reference %#04x", math.Float32bits(x), enc[i], ToF16(x), want)
			}
		}
		halves := make([]F16, len(data)/2)
		for i := range halves {
			halves[i] = binary.LittleEndian.Uint16(data[2*i:])
		}
		wide := make([]float32, len(halves))
		DecodeF16(wide, halves)
		back := make([]F16, len(halves))
		EncodeF16(back, wide)
		for i, h := range halves {
			if math.Float32bits(wide[i]) != math.Float32bits(FromF16(h)) {
				t.Fatalf("%#04x: kernel widens to %#08x, FromF16 to %#08x", h, math.Float32bits(wide[i]), math.Float32bits(FromF16(h)))
			}
			if want := h; isNaN16(h) && (!isNaN16(back[i]) || back[i]>>15 != h>>15) || !isNaN16(h) && back[i] != want {
				t.Fatalf("%#04x round-trips to %#04x", h, back[i])
			}
		}
	})
}
