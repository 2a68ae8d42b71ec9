package nn

import (
	"math"
	"testing"
)

func TestGeLUValues(t *testing.T) {
	// Values of PyTorch's F.gelu(x, approximate="tanh") and F.gelu(x).
	tests := []struct {
		name  string
		exact bool
		x     []float32
		want  []float64
	}{
		{"tanh", false, []float32{-3, -1, 0, 0.5, 1, 2}, []float64{-0.0036373, -0.1588080, 0, 0.3457140, 0.8411920, 1.9545977}},
		{"erf", true, []float32{-3, -1, 0, 0.5, 1, 2}, []float64{-0.0040497, -0.1586553, 0, 0.3457312, 0.8413447, 1.9544997}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &GeLU{Exact: tt.exact}
			y := g.Forward(FromData(tt.x, 2, 3), false)
			for i, w := range tt.want {
				if math.Abs(float64(y.Data[i])-w) > 1e-6 {
					t.Errorf("gelu(%g) = %.7f, want %.7f", tt.x[i], y.Data[i], w)
				}
			}
		})
	}
}

func TestGeLUGrad(t *testing.T) {
	for _, exact := range []bool{false, true} {
		checkLayer(t, &GeLU{Exact: exact}, randTensor(6, 2, 3, 8), true, nil, 1e-2, layerTol)
	}
}

func TestDropoutGrad(t *testing.T) {
	d := NewDropout(0.3, NewStream(1, "dropout", 0))
	state, err := d.Stream.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := d.Stream.UnmarshalBinary(state); err != nil {
			t.Fatal(err)
		}
	}
	checkLayer(t, d, randTensor(7, 4, 25), true, restore, 1e-2, layerTol)
}

func TestDropoutMask(t *testing.T) {
	const p, n = 0.25, 40000
	d := NewDropout(p, NewStream(1, "dropout", 0))
	x := NewTensor(n)
	for i := range x.Data {
		x.Data[i] = 2
	}
	y := d.Forward(x, true)
	dy := NewTensor(n)
	for i := range dy.Data {
		dy.Data[i] = 1
	}
	dx := d.Backward(dy)
	dropped := 0
	for i, v := range y.Data {
		switch v {
		case 0:
			dropped++
			if dx.Data[i] != 0 {
				t.Fatalf("dropped element %d passes gradient %g", i, dx.Data[i])
			}
		case 2 / (1 - p):
			if dx.Data[i] != 1/(1-p) {
				t.Fatalf("kept element %d has gradient %g, want %g", i, dx.Data[i], 1/(1-p))
			}
		default:
			t.Fatalf("element %d = %g, want 0 or %g", i, v, 2/(1-p))
		}
	}
	if frac := float64(dropped) / n; math.Abs(frac-p) > 0.01 {
		t.Errorf("dropped %.4f of the elements, want about %g", frac, p)
	}
}

func TestDropoutIdentity(t *testing.T) {
	tests := []struct {
		name  string
		p     float32
		train bool
	}{
		{"eval", 0.5, false},
		{"p=0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStream(1, "dropout", 0)
			before, _ := s.MarshalBinary()
			d := NewDropout(tt.p, s)
			x, dy := randTensor(1, 3, 4), randTensor(2, 3, 4)
			if y := d.Forward(x, tt.train); y != x {
				t.Error("Forward did not pass its input through")
			}
			if dx := d.Backward(dy); dx != dy {
				t.Error("Backward did not pass its gradient through")
			}
			if after, _ := s.MarshalBinary(); string(after) != string(before) {
				t.Error("the stream advanced though no mask was drawn")
			}
		})
	}
}

func TestDropoutResume(t *testing.T) {
	// A stream restored from its saved state draws the masks that the
	// uninterrupted stream draws.
	s := NewStream(9, "dropout", 3)
	d := NewDropout(0.5, s)
	x := randTensor(1, 64)
	d.Forward(x, true)
	state, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), d.Forward(x, true).Data...)

	resumed := NewStream(0, "other", 0)
	if err := resumed.UnmarshalBinary(state); err != nil {
		t.Fatal(err)
	}
	got := NewDropout(0.5, resumed).Forward(x, true).Data
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("resumed mask differs at %d: %g, want %g", i, got[i], want[i])
		}
	}
}
