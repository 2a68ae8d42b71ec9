package data

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestNewSamplerErrors(t *testing.T) {
	tests := []struct {
		name                  string
		n, global, rank, size int
		want                  string
	}{
		{"empty data set", 0, 4, 0, 1, "data set of 0 examples: the sampler needs at least one"},
		{"negative data set", -5, 4, 0, 1, "data set of -5 examples"},
		{"no ranks", 100, 4, 0, 0, "job of 0 ranks: pass the number of ranks, at least 1"},
		{"negative rank", 100, 4, -1, 2, "rank -1 out of range for 2 ranks: pass a rank from 0 to 1"},
		{"rank too large", 100, 4, 2, 2, "rank 2 out of range for 2 ranks: pass a rank from 0 to 1"},
		{"zero batch", 100, 0, 0, 1, "global batch 0: pass a positive number of examples per step"},
		{"batch exceeds data", 100, 128, 0, 1, "global batch 128 exceeds the data set's 100 examples: pass at most 100"},
		{"batch does not split", 100, 10, 0, 3, "global batch 10 does not split over 3 ranks: pass a multiple of 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSampler(tt.n, tt.global, tt.rank, tt.size, 1, true)
			if err == nil {
				t.Fatalf("NewSampler(%d, %d, %d, %d) = %v, want an error", tt.n, tt.global, tt.rank, tt.size, s)
			}
			if !errors.Is(err, ErrArgument) {
				t.Errorf("error %q does not wrap ErrArgument", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// mustSampler returns a sampler or fails the test.
func mustSampler(t testing.TB, n, global, rank, size int, seed uint64, shuffle bool) *Sampler {
	t.Helper()
	s, err := NewSampler(n, global, rank, size, seed, shuffle)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSamplerLocalSlicesConcatenate(t *testing.T) {
	const n, global, seed = 250, 60, 7
	for _, shuffle := range []bool{false, true} {
		single := mustSampler(t, n, global, 0, 1, seed, shuffle)
		for size := 1; size <= 5; size++ {
			ranks := make([]*Sampler, size)
			for r := range ranks {
				ranks[r] = mustSampler(t, n, global, r, size, seed, shuffle)
			}
			// Three epochs, so that the test crosses epoch boundaries.
			for step := range 3 * single.StepsPerEpoch() {
				var got []int
				for r, s := range ranks {
					local := s.Local(step)
					if len(local) != s.LocalBatch() || s.LocalBatch() != global/size {
						t.Fatalf("shuffle=%v size=%d rank %d step %d: %d indices, LocalBatch %d, want %d",
							shuffle, size, r, step, len(local), s.LocalBatch(), global/size)
					}
					got = append(got, local...)
				}
				if want := single.Global(step); !slices.Equal(got, want) {
					t.Fatalf("shuffle=%v size=%d step %d: ranks' slices concatenate to %v, single process uses %v",
						shuffle, size, step, got, want)
				}
				if g := ranks[size-1].Global(step); !slices.Equal(g, got) {
					t.Fatalf("shuffle=%v size=%d step %d: Global on the last rank differs from the single process", shuffle, size, step)
				}
			}
		}
	}
}

func TestSamplerEpochCoverage(t *testing.T) {
	tests := []struct {
		name      string
		n, global int
		shuffle   bool
	}{
		{"exact, in order", 240, 60, false},
		{"exact, shuffled", 240, 60, true},
		{"remainder dropped, in order", 250, 60, false},
		{"remainder dropped, shuffled", 250, 60, true},
		{"one batch", 7, 7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustSampler(t, tt.n, tt.global, 0, 1, 3, tt.shuffle)
			spe := s.StepsPerEpoch()
			if spe != tt.n/tt.global {
				t.Fatalf("StepsPerEpoch = %d, want %d", spe, tt.n/tt.global)
			}
			for epoch := range 3 {
				seen := make([]int, tt.n)
				for step := epoch * spe; step < (epoch+1)*spe; step++ {
					if e := s.Epoch(step); e != epoch {
						t.Fatalf("Epoch(%d) = %d, want %d", step, e, epoch)
					}
					for _, i := range s.Global(step) {
						if i < 0 || i >= tt.n {
							t.Fatalf("epoch %d step %d: index %d outside [0, %d)", epoch, step, i, tt.n)
						}
						seen[i]++
					}
				}
				used := 0
				for i, c := range seen {
					if c > 1 {
						t.Fatalf("epoch %d: index %d used %d times", epoch, i, c)
					}
					used += c
				}
				if used != spe*tt.global {
					t.Fatalf("epoch %d: %d distinct indices used, want %d", epoch, used, spe*tt.global)
				}
				if !tt.shuffle && seen[tt.n-1] != 0 && tt.n%tt.global != 0 {
					t.Fatalf("epoch %d: unshuffled sampler used the dropped index %d", epoch, tt.n-1)
				}
			}
		})
	}
}

func TestSamplerDeterministic(t *testing.T) {
	a := mustSampler(t, 1000, 100, 1, 4, 42, true)
	b := mustSampler(t, 1000, 100, 1, 4, 42, true)
	// b is asked in another order, so its cache holds other epochs between.
	steps := []int{0, 5, 10, 35, 11, 0}
	for i, step := range steps {
		back := steps[len(steps)-1-i]
		if got, want := b.Local(back), a.Local(back); !slices.Equal(got, want) {
			t.Fatalf("Local(%d) differs between two samplers of the same seed: %v and %v", back, got, want)
		}
		if got, want := a.Local(step), b.Local(step); !slices.Equal(got, want) {
			t.Fatalf("Local(%d) differs between two samplers of the same seed: %v and %v", step, got, want)
		}
	}
	other := mustSampler(t, 1000, 100, 1, 4, 43, true)
	if slices.Equal(a.Global(0), other.Global(0)) {
		t.Fatal("seeds 42 and 43 give the same first batch")
	}
}

func TestSamplerEpochsDiffer(t *testing.T) {
	s := mustSampler(t, 500, 50, 0, 1, 9, true)
	spe := s.StepsPerEpoch()
	for epoch := 1; epoch < 4; epoch++ {
		if slices.Equal(s.Global(0), s.Global(epoch*spe)) {
			t.Errorf("epochs 0 and %d start with the same batch %v", epoch, s.Global(0))
		}
	}
	plain := mustSampler(t, 500, 50, 0, 1, 9, false)
	if !slices.Equal(plain.Global(0), plain.Global(spe)) {
		t.Error("an unshuffled sampler's epochs differ")
	}
	if !slices.Equal(plain.Global(1), []int{50, 51, 52, 53, 54, 55, 56, 57, 58, 59,
		60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
		80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99}) {
		t.Errorf("unshuffled Global(1) = %v, want 50..99", plain.Global(1))
	}
}

// TestSamplerGolden pins the shuffled order, so that a checkpoint written
// by one build resumes to the same batches under another.
func TestSamplerGolden(t *testing.T) {
	s := mustSampler(t, 10, 10, 0, 1, 1, true)
	want := map[int][]int{
		0: {7, 6, 1, 3, 2, 4, 8, 9, 0, 5},
		1: {2, 5, 8, 3, 4, 1, 7, 6, 0, 9},
	}
	for step, w := range want {
		if got := s.Global(step); !slices.Equal(got, w) {
			t.Errorf("Global(%d) with seed 1 = %v, want %v", step, got, w)
		}
	}
}

// TestSamplerUniform checks that the shuffle is unbiased: over many epochs
// every index leads an epoch about equally often.
func TestSamplerUniform(t *testing.T) {
	const n, epochs = 10, 20000
	s := mustSampler(t, n, n, 0, 1, 2, true)
	var first [n]int
	for epoch := range epochs {
		first[s.Global(epoch)[0]]++
	}
	for i, c := range first {
		// The expected count is 2000 with a standard deviation of 42.
		if c < 1800 || c > 2200 {
			t.Errorf("index %d leads %d of %d epochs, want about %d", i, c, epochs, epochs/n)
		}
	}
}

func TestSamplerNegativeStep(t *testing.T) {
	s := mustSampler(t, 100, 10, 0, 1, 5, true)
	if e := s.Epoch(-1); e != -1 {
		t.Errorf("Epoch(-1) = %d, want -1", e)
	}
	if got := s.Global(-1); len(got) != 10 {
		t.Errorf("Global(-1) has %d indices, want 10", len(got))
	}
}

func TestSamplerMicro(t *testing.T) {
	s := mustSampler(t, 1000, 24, 1, 2, 11, true) // local batch 12
	for _, k := range []int{1, 2, 3, 4, 6, 12} {
		for step := range 50 {
			var got []int
			for i := range k {
				m, err := s.Micro(step, k, i)
				if err != nil {
					t.Fatalf("Micro(%d, %d, %d): %v", step, k, i, err)
				}
				if len(m) != 12/k {
					t.Fatalf("Micro(%d, %d, %d) has %d indices, want %d", step, k, i, len(m), 12/k)
				}
				got = append(got, m...)
			}
			if want := s.Local(step); !slices.Equal(got, want) {
				t.Fatalf("step %d: %d micro-batches concatenate to %v, want Local %v", step, k, got, want)
			}
		}
	}
}

func TestSamplerMicroErrors(t *testing.T) {
	s := mustSampler(t, 1000, 24, 1, 2, 11, true) // local batch 12
	tests := []struct {
		name string
		k, i int
		want string
	}{
		{"zero k", 0, 0, "0 micro-batches: pass at least 1"},
		{"k does not divide", 5, 0, "local batch 12 does not split into 5 micro-batches: pass a k that divides 12, or a global batch that is a multiple of 10"},
		{"negative part", 3, -1, "micro-batch -1 out of range for 3 micro-batches: pass 0 to 2"},
		{"part too large", 3, 3, "micro-batch 3 out of range for 3 micro-batches: pass 0 to 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := s.Micro(0, tt.k, tt.i)
			if err == nil {
				t.Fatalf("Micro(0, %d, %d) = %v, want an error", tt.k, tt.i, m)
			}
			if !errors.Is(err, ErrArgument) || err.Error() != tt.want {
				t.Errorf("error %q, want %q wrapping ErrArgument", err, tt.want)
			}
		})
	}
}

// TestSamplerConcurrent has goroutines share one sampler across epochs, for
// the race detector.
func TestSamplerConcurrent(t *testing.T) {
	s := mustSampler(t, 300, 30, 0, 3, 1, true)
	want := make([][]int, 40)
	for step := range want {
		want[step] = mustSampler(t, 300, 30, 0, 3, 1, true).Local(step)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for k := range want {
				step := (k*7 + g*13) % len(want)
				if got := s.Local(step); !slices.Equal(got, want[step]) {
					errs <- errors.New("concurrent Local differs from a fresh sampler's")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
