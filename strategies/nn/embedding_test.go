package nn

import (
	"errors"
	"testing"
)

func newTestEmbedding(vocab, dim int) (*Embedding, *Store) {
	b := NewBuilder()
	e := NewEmbedding(b.Scope("wte"), vocab, dim, Normal(0.02))
	return e, b.Build(1)
}

func TestEmbeddingForward(t *testing.T) {
	e, _ := newTestEmbedding(5, 3)
	y, err := e.Forward([]int32{4, 0, 4, 2, 1, 3}, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !sameShape(y.Shape, []int{2, 3, 3}) {
		t.Fatalf("shape %v, want [2 3 3]", y.Shape)
	}
	for i, id := range []int32{4, 0, 4, 2, 1, 3} {
		for j := 0; j < 3; j++ {
			if y.Data[i*3+j] != e.W.W[int(id)*3+j] {
				t.Fatalf("row %d is not row %d of the table", i, id)
			}
		}
	}
	if y, _ := e.Forward([]int32{1, 2}); !sameShape(y.Shape, []int{2, 3}) {
		t.Errorf("shape without a shape given %v, want [2 3]", y.Shape)
	}
}

func TestEmbeddingErrors(t *testing.T) {
	tests := []struct {
		name  string
		ids   []int32
		shape []int
		want  error
	}{
		{"id = vocab", []int32{0, 5}, nil, ErrIndex},
		{"negative id", []int32{-1}, nil, ErrIndex},
		{"shape", []int32{0, 1, 2}, []int{2, 2}, ErrShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newTestEmbedding(5, 3)
			if _, err := e.Forward(tt.ids, tt.shape...); !errors.Is(err, tt.want) {
				t.Errorf("error %v, want one wrapping %v", err, tt.want)
			}
		})
	}
}

func TestEmbeddingGrad(t *testing.T) {
	e, st := newTestEmbedding(6, 4)
	ids := []int32{1, 3, 1, 5, 0, 1, 3, 2} // repeats, so rows add up; 4 unused
	y, err := e.Forward(ids, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	r := randTensor(2, y.Shape...)
	rs := make([]float64, r.Len())
	for i, v := range r.Data {
		rs[i] = float64(v)
	}
	e.Backward(r)
	once := append([]float32(nil), st.G...)
	e.Backward(r)
	checkAccumulated(t, st.Params, []wrt{{"wte.weight", nil, once}})
	for j := 4 * 4; j < 5*4; j++ {
		if once[j] != 0 {
			t.Fatalf("unused row 4 has gradient %g", once[j])
		}
	}
	f := func() float64 {
		y, err := e.Forward(ids, 2, 4)
		if err != nil {
			t.Fatal(err)
		}
		return dot(rs, y.Data)
	}
	checkGrad(t, f, 1e-2, layerTol, wrt{"wte.weight", e.W.W, once})
}
