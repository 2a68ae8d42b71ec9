package compress

import (
	"math"
	"testing"
)

// Every bfloat16 widens to a float32 that rounds back to it (NaNs to a
// NaN, quiet, with the same sign).
func TestBF16RoundTripsAllPatterns(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := FromBF16(BF16(h))
		got := ToBF16(f)
		if f != f {
			if got&0x7fff <= 0x7f80 || got>>15 != BF16(h)>>15 {
				t.Fatalf("NaN %#04x came back as %#04x", h, got)
			}
			continue
		}
		if got != BF16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, got)
		}
	}
}

func TestToBF16Rounding(t *testing.T) {
	for _, c := range []struct {
		name string
		in   uint32
		want BF16
	}{
		{"exact", 0x3f800000, 0x3f80},
		{"below half rounds down", 0x3f807fff, 0x3f80},
		{"above half rounds up", 0x3f808001, 0x3f81},
		{"tie to even stays", 0x3f808000, 0x3f80},
		{"tie to even goes up", 0x3f818000, 0x3f82},
		{"negative tie", 0xbf818000, 0xbf82},
		{"carry into exponent", 0x3fffffff, 0x4000},
		{"max float32 overflows to Inf", 0x7f7fffff, 0x7f80},
		{"largest bf16 kept", 0x7f7f0000, 0x7f7f},
		{"+Inf", 0x7f800000, 0x7f80},
		{"-Inf", 0xff800000, 0xff80},
		{"smallest subnormal rounds to zero", 0x00000001, 0x0000},
		{"subnormal rounds up", 0x00008001, 0x0001},
		{"subnormal tie to even", 0x00018000, 0x0002},
		{"subnormal to smallest normal", 0x007fffff, 0x0080},
		{"negative zero", 0x80000000, 0x8000},
		{"NaN with low payload only stays NaN", 0x7f800001, 0x7fc0},
		{"negative quiet NaN", 0xffc00000, 0xffc0},
	} {
		if got := ToBF16(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("%s: ToBF16(%#08x) = %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
}

func TestSliceHelpers(t *testing.T) {
	src := []float32{1, -2.5, 3.140625, 1e30}
	h := make([]BF16, len(src))
	EncodeBF16(h, src)
	back := make([]float32, len(src))
	DecodeBF16(back, h)
	for i := range src {
		if back[i] != FromBF16(ToBF16(src[i])) {
			t.Errorf("element %d: %g, want %g", i, back[i], FromBF16(ToBF16(src[i])))
		}
	}
	AddBF16(h, h) // doubling is exact
	AccumulateBF16(h, []float32{0, 0, 0, 0})
	for i := range src {
		if want := 2 * back[i]; FromBF16(h[i]) != want {
			t.Errorf("element %d: doubled %g, want %g", i, FromBF16(h[i]), want)
		}
	}
}
