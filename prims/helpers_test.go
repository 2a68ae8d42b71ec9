package prims_test

import (
	"fmt"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// reduceValue is rank's element i of a reduction's input: small integers
// in -3..3, so that float sums and products of up to 8 ranks are exact and
// every type (uint8 wrapping) agrees with a sequential reference.
func reduceValue[T spmd.Number](rank, i int) T {
	v := (rank*5+i*3)%period - 3
	return T(v)
}

// period is the period of reduceValue in i.
const period = 7

// tagValue is rank's element i of a data-movement input: it says where it
// came from, so misplaced blocks show.
func tagValue[T spmd.Number](rank, i int) T {
	return T((rank*31 + i) % 101)
}

func fill[T spmd.Number](n int, f func(i int) T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

// reference returns element i of the reduction of the inputs of ranks
// 0..p-1, reduced one after the other. Inputs repeat every period
// elements, so it reduces one period.
func reference[T spmd.Number](p int, op prims.Op[T]) func(i int) T {
	ref := fill(period, func(i int) T { return reduceValue[T](0, i) })
	for r := 1; r < p; r++ {
		op.Reduce(ref, fill(period, func(i int) T { return reduceValue[T](r, i) }))
	}
	return func(i int) T { return ref[i%period] }
}

// expect compares got with want(i) exactly (inputs are chosen so that
// floats are exact too) and describes the first difference.
func expect[T spmd.Number](what string, got []T, n int, want func(i int) T) error {
	if len(got) != n {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), n)
	}
	for i, g := range got {
		if w := want(i); g != w {
			return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, len(got), g, w)
		}
	}
	return nil
}
