package nn

import (
	"errors"
	"testing"
)

// A batch whose rows are narrower or wider than the first layer's inputs
// is refused with ErrShape: narrower failed inside the product, wider
// returned a loss from rows read askew.
func TestSequentialRefusesAWidthThatDoesNotFit(t *testing.T) {
	m := NewMLP(1, 8, 16, 4)
	for _, xdim := range []int{7, 9} {
		n := 3
		b := &Batch{N: n, XDim: xdim, X: make([]float32, n*xdim), Y: []int32{0, 1, 2}}
		_, err := m.Forward(b, true)
		if !errors.Is(err, ErrShape) {
			t.Errorf("XDim %d for 8 inputs: err %v, want ErrShape", xdim, err)
		}
	}
	b := &Batch{N: 3, XDim: 8, X: make([]float32, 24), Y: []int32{0, 1, 2}}
	if _, err := m.Forward(b, true); err != nil {
		t.Fatalf("a batch that fits: %v", err)
	}
}
