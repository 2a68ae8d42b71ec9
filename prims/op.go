package prims

import (
	"github.com/gorun-hpc/gorun/prims/kernel"
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
// kernels where the CPU has them (package kernel); elsewhere floats run
// gonum's assembly kernels and uint8 adds eight bytes per 64-bit word.
func Sum[T spmd.Number]() Op[T] {
	if k, ok := fastest[T](kernel.AddF32, kernel.AddF64, kernel.AddI32, kernel.AddI64, kernel.AddU8); ok {
		return Op[T]{"sum", k}
	}
	return Op[T]{"sum", kernel.Add[T]}
}

// Prod multiplies. Floats and int32 run AVX2 kernels where the CPU has
// them.
func Prod[T spmd.Number]() Op[T] {
	if k, ok := fastest[T](kernel.MulF32, kernel.MulF64, kernel.MulI32); ok {
		return Op[T]{"prod", k}
	}
	return Op[T]{"prod", kernel.Mul[T]}
}

// Max keeps the larger element; a NaN wins over any number, whichever side
// it is on, so that every rank computes the same result. Floats and int32
// run AVX2 kernels where the CPU has them.
func Max[T spmd.Number]() Op[T] {
	if k, ok := fastest[T](kernel.MaxF32, kernel.MaxF64, kernel.MaxI32); ok {
		return Op[T]{"max", k}
	}
	return Op[T]{"max", kernel.Max[T]}
}

// Min keeps the smaller element; a NaN wins, as for Max.
func Min[T spmd.Number]() Op[T] {
	if k, ok := fastest[T](kernel.MinF32, kernel.MinF64, kernel.MinI32); ok {
		return Op[T]{"min", k}
	}
	return Op[T]{"min", kernel.Min[T]}
}

// fastest returns the kernel of fast that takes []T, if there is one.
// The callers make the generic kernel's func value only when none does:
// it carries T's dictionary, and made on every call it was an allocation
// wherever the Op escapes (the Op that a non-blocking call keeps).
func fastest[T spmd.Number](fast ...any) (func(dst, src []T), bool) {
	for _, f := range fast {
		if k, ok := f.(func(dst, src []T)); ok {
			return k, true
		}
	}
	return nil, false
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

// Reduce folds src into dst with the op: dst[i] = dst[i] op src[i] for i
// in 0..len(dst)-1. src must be at least as long as dst.
func (op Op[T]) Reduce(dst, src []T) { op.reduce(dst, src) }
