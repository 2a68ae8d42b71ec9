package data

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestSyntheticErrors(t *testing.T) {
	tests := []struct {
		name            string
		n, dim, classes int
		want            string
	}{
		{"no examples", 0, 4, 3, "synthetic set of 0 examples: pass at least 1"},
		{"no features", 10, 0, 3, "synthetic set of dimension 0: pass at least 1"},
		{"one class", 10, 4, 1, "synthetic set of 1 classes: pass at least 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Synthetic(tt.n, tt.dim, tt.classes, 1)
			if !errors.Is(err, ErrArgument) || err.Error() != tt.want {
				t.Errorf("Synthetic(%d, %d, %d) error %v, want %q wrapping ErrArgument", tt.n, tt.dim, tt.classes, err, tt.want)
			}
		})
	}
}

// mustSynthetic returns a synthetic set or fails the test.
func mustSynthetic(t testing.TB, n, dim, classes int, seed uint64) *Classification {
	t.Helper()
	c, err := Synthetic(n, dim, classes, seed)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSyntheticDeterministic(t *testing.T) {
	a := mustSynthetic(t, 500, 8, 5, 3)
	b := mustSynthetic(t, 500, 8, 5, 3)
	if !slices.Equal(a.X, b.X) || !slices.Equal(a.Y, b.Y) {
		t.Fatal("two sets of the same seed differ")
	}
	if a.Len() != 500 || a.Dim() != 8 || a.Classes() != 5 || len(a.X) != 500*8 {
		t.Fatalf("Len %d Dim %d Classes %d len(X) %d, want 500 8 5 4000", a.Len(), a.Dim(), a.Classes(), len(a.X))
	}
	c := mustSynthetic(t, 500, 8, 5, 4)
	if slices.Equal(a.X, c.X) {
		t.Fatal("seeds 3 and 4 give the same features")
	}
	big := mustSynthetic(t, 800, 8, 5, 3)
	if !slices.Equal(a.X, big.X[:len(a.X)]) || !slices.Equal(a.Y, big.Y[:a.Len()]) {
		t.Fatal("the first 500 examples of a set of 800 differ from the set of 500")
	}
	for _, y := range a.Y {
		if y < 0 || int(y) >= a.Classes() {
			t.Fatalf("label %d outside [0, %d)", y, a.Classes())
		}
	}
}

// TestSyntheticLearnable fits class means on one half and classifies the
// other half by the nearest mean: far above chance, but not perfect.
func TestSyntheticLearnable(t *testing.T) {
	tests := []struct {
		name         string
		dim, classes int
	}{
		{"2-d, 3 classes", 2, 3},
		{"16-d, 10 classes", 16, 10},
		{"64-d, 10 classes", 64, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const half = 2000
			c := mustSynthetic(t, 2*half, tt.dim, tt.classes, 1)
			means := make([]float64, tt.classes*tt.dim)
			counts := make([]int, tt.classes)
			for i := range half {
				k := int(c.Y[i])
				counts[k]++
				for d := range tt.dim {
					means[k*tt.dim+d] += float64(c.X[i*tt.dim+d])
				}
			}
			for k, n := range counts {
				if n == 0 {
					t.Fatalf("class %d has no examples among %d", k, half)
				}
				for d := range tt.dim {
					means[k*tt.dim+d] /= float64(n)
				}
			}
			right := 0
			for i := half; i < 2*half; i++ {
				if nearest(c.X[i*tt.dim:(i+1)*tt.dim], means, tt.classes) == int(c.Y[i]) {
					right++
				}
			}
			acc, chance := float64(right)/half, 1/float64(tt.classes)
			t.Logf("nearest-mean accuracy %.3f, chance %.3f", acc, chance)
			if want := (1 + chance) / 2; acc < want {
				t.Errorf("nearest-mean accuracy %.3f, want at least %.3f, halfway from chance to perfect", acc, want)
			}
			if acc > 0.995 {
				t.Errorf("nearest-mean accuracy %.3f: the classes barely overlap, the set is too easy", acc)
			}
		})
	}
}

// nearest returns the class whose mean is closest to x.
func nearest(x []float32, means []float64, classes int) int {
	best, bestDist := 0, 0.0
	for k := range classes {
		dist := 0.0
		for d, v := range x {
			diff := float64(v) - means[k*len(x)+d]
			dist += diff * diff
		}
		if k == 0 || dist < bestDist {
			best, bestDist = k, dist
		}
	}
	return best
}

func TestClassificationBatch(t *testing.T) {
	c := mustSynthetic(t, 50, 3, 4, 1)
	idx := []int{4, 0, 49}
	x := make([]float32, len(idx)*3)
	y := make([]int32, len(idx))
	if err := c.Batch(idx, x, y); err != nil {
		t.Fatal(err)
	}
	for j, i := range idx {
		if !slices.Equal(x[j*3:j*3+3], c.X[i*3:i*3+3]) || y[j] != c.Y[i] {
			t.Errorf("row %d: x %v y %d, want example %d: %v %d", j, x[j*3:j*3+3], y[j], i, c.X[i*3:i*3+3], c.Y[i])
		}
	}
	allocs := testing.AllocsPerRun(100, func() { _ = c.Batch(idx, x, y) })
	if allocs != 0 {
		t.Errorf("Batch allocates %v times, want 0", allocs)
	}
}

func TestClassificationBatchErrors(t *testing.T) {
	c := mustSynthetic(t, 50, 3, 4, 1)
	tests := []struct {
		name string
		idx  []int
		x    int
		y    int
		want string
	}{
		{"short x", []int{1, 2}, 5, 2, "batch of 2 examples of dimension 3 needs x of 6 and y of 2, got 5 and 2"},
		{"short y", []int{1, 2}, 6, 1, "got 6 and 1"},
		{"index too large", []int{1, 50}, 6, 2, "index 50 (batch row 1) outside the data set of 50 examples"},
		{"negative index", []int{-1}, 3, 1, "index -1 (batch row 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y := make([]float32, tt.x), make([]int32, tt.y)
			err := c.Batch(tt.idx, x, y)
			if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Batch error %v, want one containing %q wrapping ErrArgument", err, tt.want)
			}
			if slices.ContainsFunc(x, func(v float32) bool { return v != 0 }) {
				t.Error("a failed Batch wrote to x")
			}
		})
	}
}
