package gemm_test

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/gorun-hpc/gorun/strategies/nn/gemm"
)

// A layer's forward pass, Y = X·W, with X a batch of two rows of three
// inputs and W stored inputs×outputs, then its weight gradient dW = Xᵀ·dY.
func ExampleSgemm() {
	x := []float32{
		1, 2, 3,
		4, 5, 6,
	}
	w := []float32{
		1, 0,
		0, 1,
		1, 1,
	}
	y := make([]float32, 2*2)
	gemm.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 3, 1, x, 3, w, 2, 0, y, 2)
	fmt.Println(y)

	dy := []float32{
		1, 0,
		0, 1,
	}
	dw := make([]float32, 3*2)
	gemm.Sgemm(blas.Trans, blas.NoTrans, 3, 2, 2, 1, x, 3, dy, 2, 0, dw, 2)
	fmt.Println(dw)
	// Output:
	// [4 5 10 11]
	// [1 4 2 5 3 6]
}

// Implementation routes gonum's float32 BLAS, and so blas32.Gemm, through
// this package's Sgemm.
func ExampleImplementation() {
	prev := blas32.Implementation()
	blas32.Use(gemm.Implementation{})
	defer blas32.Use(prev)

	a := blas32.General{Rows: 1, Cols: 2, Stride: 2, Data: []float32{1, 2}}
	b := blas32.General{Rows: 2, Cols: 1, Stride: 1, Data: []float32{3, 4}}
	c := blas32.General{Rows: 1, Cols: 1, Stride: 1, Data: []float32{100}}
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, a, b, 1, c)
	fmt.Println(c.Data[0])
	// Output: 111
}
