package prims

import (
	"encoding/binary"
	"unsafe"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/floats"

	"github.com/gorun-hpc/gorun/spmd"
)

// Op is a reduction: it folds src into dst element by element
// (dst[i] = dst[i] op src[i]). Ops must be associative and commutative;
// algorithms combine partial results in whatever order their schedule
// gives. The zero Op is invalid. An Op is safe for concurrent use.
type Op[T spmd.Number] struct {
	name   string
	reduce func(dst, src []T)
}

// Name returns the op's name ("sum", or "user" for OpFunc).
func (op Op[T]) Name() string { return op.name }

// Sum adds. Sums of float32, float64, int32, int64 and uint8 run AVX2
// kernels where the CPU has them (add_amd64.s); elsewhere floats run
// gonum's assembly kernels and uint8 adds eight bytes per 64-bit word.
func Sum[T spmd.Number]() Op[T] {
	return kernel("sum", add[T], addF32, addF64, addI32, addI64, addU8)
}

// Prod multiplies. Floats and int32 run AVX2 kernels where the CPU has
// them.
func Prod[T spmd.Number]() Op[T] {
	return kernel("prod", mul[T], mulF32, mulF64, mulI32)
}

// Max keeps the larger element; a NaN wins over any number, whichever side
// it is on, so that every rank computes the same result. Floats and int32
// run AVX2 kernels where the CPU has them.
func Max[T spmd.Number]() Op[T] {
	return kernel("max", maximum[T], maxF32, maxF64, maxI32)
}

// Min keeps the smaller element; a NaN wins, as for Max.
func Min[T spmd.Number]() Op[T] {
	return kernel("min", minimum[T], minF32, minF64, minI32)
}

// kernel makes the op name for T: the one of fast that takes []T, if
// there is one, else generic.
func kernel[T spmd.Number](name string, generic func(dst, src []T), fast ...any) Op[T] {
	for _, f := range fast {
		if k, ok := f.(func(dst, src []T)); ok {
			return Op[T]{name, k}
		}
	}
	return Op[T]{name, generic}
}

// OpFunc makes a user-supplied reduction: f must set dst[i] to dst[i]
// combined with src[i] for every i (len(src) == len(dst)), associatively
// and commutatively, and must not keep either slice. It is called from the
// calling goroutine, on pieces of the buffers.
func OpFunc[T spmd.Number](f func(dst, src []T)) Op[T] {
	return Op[T]{"user", f}
}

func (op Op[T]) valid() error {
	if op.reduce == nil {
		return ErrOp
	}
	return nil
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
func vecAdd[T spmd.Number](k func(dst, src *byte, n int), dst, src []T) int {
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
func vecThen[T spmd.Number](k func(dst, src *byte, n int), rest func(dst, src []T), dst, src []T) {
	src = src[:len(dst)]
	i := vecAdd(k, dst, src)
	rest(dst[i:], src[i:])
}

func addI32(dst, src []int32)   { vecThen(addI32x, add[int32], dst, src) }
func addI64(dst, src []int64)   { vecThen(addI64x, add[int64], dst, src) }
func maxF32(dst, src []float32) { vecThen(maxF32x, maximum[float32], dst, src) }
func maxF64(dst, src []float64) { vecThen(maxF64x, maximum[float64], dst, src) }
func minF32(dst, src []float32) { vecThen(minF32x, minimum[float32], dst, src) }
func minF64(dst, src []float64) { vecThen(minF64x, minimum[float64], dst, src) }
func mulF32(dst, src []float32) { vecThen(mulF32x, mul[float32], dst, src) }
func mulF64(dst, src []float64) { vecThen(mulF64x, mul[float64], dst, src) }
func mulI32(dst, src []int32)   { vecThen(mulI32x, mul[int32], dst, src) }
func maxI32(dst, src []int32)   { vecThen(maxI32x, maximum[int32], dst, src) }
func minI32(dst, src []int32)   { vecThen(minI32x, minimum[int32], dst, src) }

func addF32(dst, src []float32) {
	src = src[:len(dst)]
	i := vecAdd(addF32x, dst, src)
	dst, src = dst[i:], src[i:]
	if len(dst) < smallVector {
		add(dst, src)
		return
	}
	blas32.Axpy(1, blas32.Vector{N: len(dst), Inc: 1, Data: src[:len(dst)]},
		blas32.Vector{N: len(dst), Inc: 1, Data: dst})
}

func addF64(dst, src []float64) {
	src = src[:len(dst)]
	i := vecAdd(addF64x, dst, src)
	dst, src = dst[i:], src[i:]
	if len(dst) < smallVector {
		add(dst, src)
		return
	}
	floats.Add(dst, src[:len(dst)])
}

// addU8 adds bytes eight at a time, without carries between them: the
// low seven bits of each byte add normally, the top bit by xor.
func addU8(dst, src []uint8) {
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

func add[T spmd.Number](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

func mul[T spmd.Number](dst, src []T) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] *= src[i]
	}
}

func maximum[T spmd.Number](dst, src []T) {
	src = src[:len(dst)]
	for i, s := range src {
		if s > dst[i] || s != s {
			dst[i] = s
		}
	}
}

func minimum[T spmd.Number](dst, src []T) {
	src = src[:len(dst)]
	for i, s := range src {
		if s < dst[i] || s != s {
			dst[i] = s
		}
	}
}

// Reduce folds src into dst with the op: dst[i] = dst[i] op src[i] for i
// in 0..len(dst)-1. src must be at least as long as dst.
func (op Op[T]) Reduce(dst, src []T) { op.reduce(dst, src) }
