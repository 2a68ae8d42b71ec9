package nn

import "fmt"

// Tensor is a float32 array, row-major, with a shape. Layers read their
// input's last dimension as features and every dimension before it as
// rows.
type Tensor struct {
	Shape []int
	Data  []float32
}

// NewTensor returns a zeroed tensor of the shape.
func NewTensor(shape ...int) *Tensor {
	return &Tensor{Shape: append([]int(nil), shape...), Data: make([]float32, numel(shape))}
}

// FromData wraps data as a tensor of the shape; it panics if the lengths
// differ, which is a programming error.
func FromData(data []float32, shape ...int) *Tensor {
	if numel(shape) != len(data) {
		panic(fmt.Sprintf("nn: %d elements for shape %v", len(data), shape))
	}
	return &Tensor{Shape: append([]int(nil), shape...), Data: data}
}

// Len is the number of elements.
func (t *Tensor) Len() int { return len(t.Data) }

// Cols is the last dimension's size.
func (t *Tensor) Cols() int { return t.Shape[len(t.Shape)-1] }

// Rows is the product of every dimension but the last.
func (t *Tensor) Rows() int { return numel(t.Shape[:len(t.Shape)-1]) }

// View returns a tensor of another shape over the same data.
func (t *Tensor) View(shape ...int) *Tensor { return FromData(t.Data, shape...) }

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Resize returns t if it has the shape, else a new zeroed tensor of it:
// layers keep their outputs between steps instead of allocating them anew.
func Resize(t *Tensor, shape ...int) *Tensor {
	if t != nil && sameShape(t.Shape, shape) {
		return t
	}
	return NewTensor(shape...)
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// withCols is shape with its last dimension replaced by n.
func withCols(shape []int, n int) []int {
	s := append([]int(nil), shape...)
	s[len(s)-1] = n
	return s
}
