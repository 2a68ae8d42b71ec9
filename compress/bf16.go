package compress

import "math"

// BF16 is a bfloat16 number: the sign, the 8-bit exponent and the top 7
// bits of the mantissa of a float32. It has float32's range and about 3
// significant decimal digits.
type BF16 = uint16

// ToBF16 rounds f to the nearest bfloat16, ties to even, as PyTorch's
// conversion does. Infinities keep their sign; a NaN stays a NaN (made
// quiet, its sign and top payload bits kept); a float32 too large for
// bfloat16 after rounding becomes an infinity.
func ToBF16(f float32) BF16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: truncating could make it Inf
		return BF16(u>>16) | 0x40
	}
	return BF16((u + 0x7fff + (u>>16)&1) >> 16)
}

// FromBF16 widens h to float32 exactly.
func FromBF16(h BF16) float32 { return math.Float32frombits(uint32(h) << 16) }

// EncodeBF16 rounds src into dst, which has src's length.
func EncodeBF16(dst []BF16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = ToBF16(f)
	}
}

// DecodeBF16 widens src into dst, which has src's length.
func DecodeBF16(dst []float32, src []BF16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = FromBF16(h)
	}
}

// AddBF16 sets dst[i] to the bfloat16 nearest dst[i] + src[i], each sum
// computed in float32: the reduction of a bf16 all-reduce or
// reduce-scatter (prims.OpFunc(AddBF16)).
func AddBF16(dst, src []BF16) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = ToBF16(FromBF16(dst[i]) + FromBF16(src[i]))
	}
}

// AccumulateBF16 adds src, in float32, to the bfloat16 numbers of dst.
func AccumulateBF16(dst []BF16, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = ToBF16(FromBF16(dst[i]) + src[i])
	}
}
