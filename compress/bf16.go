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

// EncodeBF16 rounds src into dst, which has src's length, as ToBF16 does
// each element (with AVX2 on amd64 CPUs that have it).
func EncodeBF16(dst []BF16, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if haveAVX2 {
		n = len(src) &^ (kernelBlock - 1)
		encBF16x(dst[:n], src[:n])
	}
	encodeBF16(dst[n:], src[n:])
}

// DecodeBF16 widens src into dst, which has src's length.
func DecodeBF16(dst []float32, src []BF16) {
	dst = dst[:len(src)]
	n := 0
	if haveAVX2 {
		n = len(src) &^ (kernelBlock - 1)
		decBF16x(dst[:n], src[:n])
	}
	decodeBF16(dst[n:], src[n:])
}

// AddBF16 sets dst[i] to the bfloat16 nearest dst[i] + src[i], each sum
// computed in float32: the reduction of a bf16 all-reduce or
// reduce-scatter (prims.OpFunc(AddBF16)). A sum that is a NaN comes out
// a NaN, but which NaN (sign, payload) is the CPU's float32 addition's
// to choose.
func AddBF16(dst, src []BF16) {
	src = src[:len(dst)]
	n := 0
	if haveAVX2 {
		n = len(dst) &^ (kernelBlock - 1)
		addBF16x(dst[:n], src[:n])
	}
	addBF16(dst[n:], src[n:])
}

// AccumulateBF16 adds src, in float32, to the bfloat16 numbers of dst.
func AccumulateBF16(dst []BF16, src []float32) {
	src = src[:len(dst)]
	n := 0
	if haveAVX2 {
		n = len(dst) &^ (kernelBlock - 1)
		accBF16x(dst[:n], src[:n])
	}
	accumulateBF16(dst[n:], src[n:])
}

// encodeBF16, decodeBF16, addBF16 and accumulateBF16 are the Go loops:
// the whole job without AVX2, and the tail after the kernels' last block.

func encodeBF16(dst []BF16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = ToBF16(f)
	}
}

func decodeBF16(dst []float32, src []BF16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = FromBF16(h)
	}
}

func addBF16(dst, src []BF16) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = ToBF16(FromBF16(dst[i]) + FromBF16(src[i]))
	}
}

func accumulateBF16(dst []BF16, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] = ToBF16(FromBF16(dst[i]) + src[i])
	}
}
