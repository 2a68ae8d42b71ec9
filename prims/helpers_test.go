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
	v := (rank*5+i*3)%7 - 3
	return T(v)
}

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

// reference reduces the inputs of ranks 0..p-1 one after the other.
func reference[T spmd.Number](n, p int, op prims.Op[T]) []T {
	ref := fill(n, func(i int) T { return reduceValue[T](0, i) })
	for r := 1; r < p; r++ {
		op.Reduce(ref, fill(n, func(i int) T { return reduceValue[T](r, i) }))
	}
	return ref
}

// same compares got with want exactly (inputs are chosen so that floats
// are exact too) and describes the first difference.
func same[T spmd.Number](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, len(got), got[i], want[i])
		}
	}
	return nil
}
