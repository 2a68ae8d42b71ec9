package pipe

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestBubbleMatchesIdeal checks the simulated bubble against the papers'
// formula, exactly: with uniform costs and no communication time every
// schedule of the grid, interleaved included, for f=1, b=2 and f=b=1
// alike, has makespan (m*v + p-1)*(f+b): each rank idles (p-1)*(f+b), the
// forward and backward of one chunk per other stage, where a chunk is 1/v
// of a stage. Its idle share is ((p-1)/v) / (m + (p-1)/v), Megatron's
// formula, so for these cases the formula is exact, not a bound; with m
// == p (Megatron's all-forwards warm-up) too. It stops being exact once
// messages take time (see TestInterleavedWarmupHidesComm).
func TestBubbleMatchesIdeal(t *testing.T) {
	for _, s := range grid(t) {
		for _, c := range [][2]float64{{1, 2}, {1, 1}} {
			t.Run(fmt.Sprintf("%s/f%v_b%v", caseName(s), c[0], c[1]), func(t *testing.T) {
				tl, err := s.Simulate(UniformCosts(c[0], c[1]))
				if err != nil {
					t.Fatal(err)
				}
				p, m, v := s.Stages, s.Micro, s.Virtual
				want := IdealBubble(s.Name, p, m, v)
				if got := tl.Bubble(); math.Abs(got-want) > 1e-9 {
					t.Errorf("bubble %v, want %v", got, want)
				}
				span := float64(m*v+p-1) * (c[0] + c[1])
				if tl.Makespan != span {
					t.Errorf("makespan %v, want (m*v + p-1)*(f+b) = %v", tl.Makespan, span)
				}
				for r := range p {
					if got, want := tl.Busy(r), float64(m*v)*(c[0]+c[1]); got != want {
						t.Errorf("rank %d busy %v, want %v", r, got, want)
					}
				}
			})
		}
	}
}

// TestInterleavedWarmupHidesComm shows why Interleaved keeps Megatron's
// warm-up of 2*(p-r-1) + (v-1)*p forwards when (p-r-1) + (v-1)*p would
// do: with no communication time both have the ideal bubble, but when
// messages take time the extra p-r-1 forwards give each rank work to do
// while it waits for the next stage's gradient, and Megatron's bubble is
// the smaller.
func TestInterleavedWarmupHidesComm(t *testing.T) {
	for _, tt := range []struct{ p, m, v int }{{2, 8, 2}, {4, 8, 2}, {4, 16, 3}} {
		meg, err := Interleaved(tt.p, tt.m, tt.v)
		if err != nil {
			t.Fatal(err)
		}
		short := &Schedule{Name: "short", Stages: tt.p, Micro: tt.m, Virtual: tt.v, Ops: make([][]Op, tt.p)}
		for r := range tt.p {
			w := InterleavedWarmup(tt.p, tt.m, tt.v, r) - (tt.p - r - 1)
			short.Ops[r] = oneFOneB(w, tt.m*tt.v, func(k int) Op { return forwardOf(meg, r, k) }, func(k int) Op { return backwardOf(meg, r, k) })
		}
		for _, comm := range []float64{0, 0.25} {
			c := UniformCosts(1, 2)
			c.Comm = comm
			a, err := meg.Simulate(c)
			if err != nil {
				t.Fatal(err)
			}
			b, err := short.Simulate(c)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("p=%d m=%d v=%d comm=%v: bubble %.4f with Megatron's warm-up, %.4f with p-r-1 fewer forwards", tt.p, tt.m, tt.v, comm, a.Bubble(), b.Bubble())
			if comm == 0 && math.Abs(a.Bubble()-b.Bubble()) > 1e-9 {
				t.Errorf("p=%d m=%d v=%d: with no communication the bubbles differ: %v, %v", tt.p, tt.m, tt.v, a.Bubble(), b.Bubble())
			}
			if comm > 0 && a.Bubble() >= b.Bubble() {
				t.Errorf("p=%d m=%d v=%d comm=%v: Megatron's warm-up's bubble %v is not below the shorter warm-up's %v", tt.p, tt.m, tt.v, comm, a.Bubble(), b.Bubble())
			}
		}
	}
}

// forwardOf returns rank r's k-th forward in s; backwardOf its k-th
// backward.
func forwardOf(s *Schedule, r, k int) Op  { return nthOf(s, r, k, Forward) }
func backwardOf(s *Schedule, r, k int) Op { return nthOf(s, r, k, Backward) }

func nthOf(s *Schedule, r, k int, kind Kind) Op {
	for _, op := range s.Ops[r] {
		if op.Kind == kind {
			if k == 0 {
				return op
			}
			k--
		}
	}
	return Op{}
}

// TestSimulateTimes checks a timeline worked out by hand: 1F1B on two
// stages, two micro-batches, f=1, b=2 and messages of 0.5.
func TestSimulateTimes(t *testing.T) {
	s, err := OneFOneB(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	c := UniformCosts(1, 2)
	c.Comm = 0.5
	tl, err := s.Simulate(c)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]Slot{
		{{Op{Forward, 0, 0}, 0, 1}, {Op{Forward, 0, 1}, 1, 2}, {Op{Backward, 0, 0}, 5, 7}, {Op{Backward, 0, 1}, 8, 10}},
		{{Op{Forward, 1, 0}, 1.5, 2.5}, {Op{Backward, 1, 0}, 2.5, 4.5}, {Op{Forward, 1, 1}, 4.5, 5.5}, {Op{Backward, 1, 1}, 5.5, 7.5}},
	}
	for r := range want {
		if fmt.Sprint(tl.Ranks[r]) != fmt.Sprint(want[r]) {
			t.Errorf("rank %d:\n got %v\nwant %v", r, tl.Ranks[r], want[r])
		}
	}
	if tl.Makespan != 10 || tl.Bubble() != 0.4 || tl.Busy(0) != 6 {
		t.Errorf("makespan %v, bubble %v, busy %v; want 10, 0.4, 6", tl.Makespan, tl.Bubble(), tl.Busy(0))
	}
	if tl.Busy(-1) != 0 || tl.Busy(2) != 0 {
		t.Errorf("Busy of a rank out of range = %v, %v; want 0", tl.Busy(-1), tl.Busy(2))
	}
}

// TestSimulateChunkCosts gives chunks different costs: the slowest stage
// sets the pace.
func TestSimulateChunkCosts(t *testing.T) {
	s, err := GPipe(2, 4)
	if err != nil {
		t.Fatal(err)
	}
	c := Costs{
		Forward:  func(chunk int) float64 { return float64(chunk + 1) },   // 1, 2
		Backward: func(chunk int) float64 { return 2 * float64(chunk+1) }, // 2, 4
	}
	tl, err := s.Simulate(c)
	if err != nil {
		t.Fatal(err)
	}
	// Rank 1's forwards run 1..9, its backwards 9..25; rank 0's last
	// backward waits for rank 1's, which ends at 25.
	if tl.Makespan != 27 {
		t.Errorf("makespan %v, want 27", tl.Makespan)
	}
}

func TestSimulateBadCosts(t *testing.T) {
	s, err := OneFOneB(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	constant := func(x float64) func(int) float64 { return func(int) float64 { return x } }
	tests := []struct {
		name string
		c    Costs
		want string
	}{
		{"no forward", Costs{Backward: constant(1)}, "without a Forward or a Backward"},
		{"negative comm", Costs{Forward: constant(1), Backward: constant(1), Comm: -1}, "Costs.Comm = -1"},
		{"infinite comm", Costs{Forward: constant(1), Backward: constant(1), Comm: math.Inf(1)}, "Costs.Comm = +Inf"},
		{"negative forward", Costs{Forward: constant(-1), Backward: constant(1)}, "F(chunk 0, mb 0) a duration of -1"},
		{"NaN backward", Costs{Forward: constant(1), Backward: constant(math.NaN())}, "a duration of NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Simulate(tt.c)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Simulate = %v; want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
}

func TestIdealBubble(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
		want    float64
	}{
		{"gpipe", 4, 8, 1, 3.0 / 11},
		{"1f1b", 4, 8, 1, 3.0 / 11},
		{"1f1b", 4, 8, 2, 3.0 / 11}, // v is not used
		{"1f1b", 1, 8, 1, 0},
		{"interleaved", 4, 8, 1, 3.0 / 11},
		{"interleaved", 4, 8, 2, 1.5 / 9.5},
		{"interleaved", 4, 8, 3, 1.0 / 9},
		{"zb-h1", 4, 8, 1, math.NaN()},
		{"1f1b", 0, 8, 1, math.NaN()},
		{"1f1b", 4, 0, 1, math.NaN()},
		{"interleaved", 4, 8, 0, math.NaN()},
	}
	for _, tt := range tests {
		got := IdealBubble(tt.name, tt.p, tt.m, tt.v)
		if math.IsNaN(tt.want) != math.IsNaN(got) || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("IdealBubble(%q, %d, %d, %d) = %v, want %v", tt.name, tt.p, tt.m, tt.v, got, tt.want)
		}
	}
}

func TestBubbleEmpty(t *testing.T) {
	if got := (&Timeline{}).Bubble(); got != 0 {
		t.Errorf("empty timeline's Bubble = %v, want 0", got)
	}
}
