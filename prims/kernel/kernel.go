package kernel

import (
	"encoding/binary"
	"unsafe"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/floats"
)

// Number is the element types of the kernels (spmd.Number's).
type Number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint |
		~float32 | ~float64
}

// smallVector is the length below which the float kernels add in a plain
// loop: gonum's assembly pays its call and checks back only on longer
// vectors (an 8-byte all-reduce spent a tenth of prims' own time in them).
const smallVector = 16

// vecAdd reduces the longest prefix of dst and src that fills whole
// 128-byte rounds with the AVX2 kernel k, if the CPU has AVX2, and returns
// how many elements it reduced. In L2 (1 MiB vectors, BenchmarkKernel) it
// adds float32 at 2x the speed of gonum's SSE kernel and int32 at 3x the
// Go loop's.
func vecAdd[T Number](k func(dst, src *byte, n int), dst, src []T) int {
	size := sizeOf[T]()
	n := len(dst) * size &^ 127
	if !haveAVX2 || n == 0 {
		return 0
	}
	k((*byte)(unsafe.Pointer(&dst[0])), (*byte)(unsafe.Pointer(&src[0])), n)
	return n / size
}

// vecThen reduces with the AVX2 kernel k as far as it goes, the rest with
// the Go loop rest.
func vecThen[T Number](k func(dst, src *byte, n int), rest func(dst, src []T), dst, src []T) {
	src = src[:len(dst)]
	i := vecAdd(k, dst, src)
	rest(dst[i:], src[i:])
}

// The typed kernels: the AVX2 kernel as far as whole 128-byte rounds go,
// the loop for the rest.

func AddI32(dst, src []int32)   { vecThen(addI32x, Add[int32], dst, src) }
func AddI64(dst, src []int64)   { vecThen(addI64x, Add[int64], dst, src) }
func MaxF32(dst, src []float32) { vecThen(maxF32x, Max[float32], dst, src) }
func MaxF64(dst, src []float64) { vecThen(maxF64x, Max[float64], dst, src) }
func MinF32(dst, src []float32) { vecThen(minF32x, Min[float32], dst, src) }
func MinF64(dst, src []float64) { vecThen(minF64x, Min[float64], dst, src) }
func MulF32(dst, src []float32) { vecThen(mulF32x, Mul[float32], dst, src) }
func MulF64(dst, src []float64) { vecThen(mulF64x, Mul[float64], dst, src) }
func MulI32(dst, src []int32)   { vecThen(mulI32x, Mul[int32], dst, src) }
func MaxI32(dst, src []int32)   { vecThen(maxI32x, Max[int32], dst, src) }
func MinI32(dst, src []int32)   { vecThen(minI32x, Min[int32], dst, src) }

// AddF32 adds float32s: AVX2, then gonum's kernel for a tail of
// smallVector elements or more.
func AddF32(dst, src []float32) {
	src = src[:len(dst)]
	i := vecAdd(addF32x, dst, src)
	dst, src = dst[i:], src[i:]
	if len(dst) < smallVector {
		Add(dst, src)
		return
	}
	blas32.Axpy(1, blas32.Vector{N: len(dst), Inc: 1, Data: src[:len(dst)]},
		blas32.Vector{N: len(dst), Inc: 1, Data: dst})
}

// AddF64 adds float64s: AVX2, then gonum's kernel for a tail of
// smallVector elements or more.
func AddF64(dst, src []float64) {
	src = src[:len(dst)]
	i := vecAdd(addF64x, dst, src)
	dst, src = dst[i:], src[i:]
	if len(dst) < smallVector {
		Add(dst, src)
		return
	}
	floats.Add(dst, src[:len(dst)])
}

// AddU8 adds bytes eight at a time, without carries between them: the
// low seven bits of each byte add normally, the top bit by xor.
func AddU8(dst, src []uint8) {
	src = src[:len(dst)]
	v := vecAdd(addU8x, dst, src)
	dst, src = dst[v:], src[v:]
	const low, high = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		a := binary.LittleEndian.Uint64(dst[i:])
		b := binary.LittleEndian.Uint64(src[i:])
		binary.LittleEndian.PutUint64(dst[i:], ((a&low)+(b&low))^((a^b)&high))
	}
	for ; i < len(dst); i++ {
		dst[i] += src[i]
	}
}

// Add adds, in a plain loop.
func Add[T Number](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// Mul multiplies, in a plain loop.
func Mul[T Number](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] *= src[i]
	}
}

// Max keeps the larger element; a NaN wins, from either side.
func Max[T Number](dst, src []T) {
	src = src[:len(dst)]
	for i, s := range src {
		if s > dst[i] || s != s {
			dst[i] = s
		}
	}
}

// Min keeps the smaller element; a NaN wins, as for Max.
func Min[T Number](dst, src []T) {
	src = src[:len(dst)]
	for i, s := range src {
		if s < dst[i] || s != s {
			dst[i] = s
		}
	}
}

// sizeOf returns the size of an element of T in bytes.
func sizeOf[T Number]() int {
	var z T
	return int(unsafe.Sizeof(z))
}
