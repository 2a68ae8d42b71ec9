package compress

import "math"

// F16 is an IEEE 754 binary16 (half precision) number: a sign, a 5-bit
// exponent and a 10-bit mantissa. Its largest finite value is 65504, its
// smallest normal 2^-14 and its smallest subnormal 2^-24; it has about
// 3.3 significant decimal digits.
type F16 = uint16

// The binary16 numbers that ToF16's rounding turns on.
const (
	// MaxF16 is the largest finite binary16, 65504. A float32 from 65520
	// up (the midpoint between MaxF16 and 2^16) rounds to +Inf.
	MaxF16 = 65504
	// f16Inf is binary16's +Inf, f16Quiet the quiet bit of its NaNs.
	f16Inf   F16 = 0x7c00
	f16Quiet F16 = 0x0200
)

// ToF16 rounds f to the nearest binary16, ties to even, as F16C's
// VCVTPS2PH with rounding mode 0 and PyTorch's .half() do. A float32 of
// magnitude 65520 or more becomes an infinity of its sign; one below
// 2^-14 becomes a subnormal (or a zero: 2^-25 and less round to ±0).
// A NaN stays a NaN as the hardware makes it: its sign and the top 10
// bits of its payload kept, the quiet bit set.
func ToF16(f float32) F16 {
	u := math.Float32bits(f)
	sign := F16(u>>16) & 0x8000
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | f16Inf | f16Quiet | F16(a>>13)&0x3ff
	case a >= 0x477ff000: // 65520 and up, Inf included
		return sign | f16Inf
	case a >= 0x38800000: // 2^-14 and up: a normal binary16
		a -= (127 - 15) << 23 // rebias the exponent
		return sign | F16((a+0xfff+(a>>13)&1)>>13)
	case a <= 0x33000000: // 2^-25 and less: a tie or below goes to zero
		return sign
	}
	// A subnormal binary16: k·2^-24, k = m·2^(e-126) rounded, where
	// m is the 24-bit significand and e (102..112) the biased exponent.
	s := 126 - a>>23 // 14..24
	m := a&0x7fffff | 0x800000
	half := uint32(1)<<(s-1) - 1 + (m>>s)&1
	return sign | F16((m+half)>>s) // a carry makes 0x0400, the least normal
}

// FromF16 widens h to float32 exactly. A NaN comes back quiet, with its
// sign and payload, as F16C's VCVTPH2PS makes it.
func FromF16(h F16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1f
	m := uint32(h & 0x3ff)
	switch {
	case e == 0x1f && m != 0: // NaN
		return math.Float32frombits(sign | 0x7fc00000 | m<<13)
	case e == 0x1f:
		return math.Float32frombits(sign | 0x7f800000)
	case e != 0:
		return math.Float32frombits(sign | (e+127-15)<<23 | m<<13)
	}
	f := float32(m) * 0x1p-24 // a subnormal or zero, exact
	if sign != 0 {
		return -f
	}
	return f
}

// EncodeF16 rounds src into dst, which has src's length, as ToF16 does
// each element (with F16C on amd64 CPUs that have it).
func EncodeF16(dst []F16, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if haveF16C {
		n = len(src) &^ (kernelBlock - 1)
		encF16x(dst[:n], src[:n])
	}
	encodeF16(dst[n:], src[n:])
}

// DecodeF16 widens src into dst, which has src's length, as FromF16 does
// each element.
func DecodeF16(dst []float32, src []F16) {
	dst = dst[:len(src)]
	n := 0
	if haveF16C {
		n = len(src) &^ (kernelBlock - 1)
		decF16x(dst[:n], src[:n])
	}
	decodeF16(dst[n:], src[n:])
}

// AddF16 sets dst[i] to the binary16 nearest dst[i] + src[i], each sum
// computed in float32: the reduction of an fp16 all-reduce
// (prims.OpFunc(AddF16)). A sum that is a NaN comes out a NaN, but which
// NaN (sign, payload) is the CPU's float32 addition's to choose.
func AddF16(dst, src []F16) {
	src = src[:len(dst)]
	n := 0
	if haveF16C {
		n = len(dst) &^ (kernelBlock - 1)
		addF16x(dst[:n], src[:n])
	}
	addF16(dst[n:], src[n:])
}

// AccumulateF16 adds src, in float32, to the binary16 numbers of dst,
// rounding each sum as ToF16 does.
func AccumulateF16(dst []F16, src []float32) {
	src = src[:len(dst)]
	n := 0
	if haveF16C {
		n = len(dst) &^ (kernelBlock - 1)
		accF16x(dst[:n], src[:n])
	}
	accumulateF16(dst[n:], src[n:])
}

// encodeF16, decodeF16, addF16 and accumulateF16 are the Go loops: the
// whole job without F16C, and the tail after the kernels' last block.

func encodeF16(dst []F16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = ToF16(f)
	}
}

func decodeF16(dst []float32, src []F16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = FromF16(h)
	}
}

func addF16(dst, src []F16) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = ToF16(FromF16(dst[i]) + FromF16(src[i]))
	}
}

func accumulateF16(dst []F16, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = ToF16(FromF16(dst[i]) + src[i])
	}
}
