package pipe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// grid is the pipelines the table tests run: p = 1, 2, 4; m = 1, 2, 4,
// 8, 16; and for interleaved v = 2, 3 where m % p == 0.
func grid(t *testing.T) []*Schedule {
	t.Helper()
	var out []*Schedule
	for _, p := range []int{1, 2, 4} {
		for _, m := range []int{1, 2, 4, 8, 16} {
			for _, f := range []func() (*Schedule, error){
				func() (*Schedule, error) { return GPipe(p, m) },
				func() (*Schedule, error) { return OneFOneB(p, m) },
			} {
				s, err := f()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, s)
			}
			if m%p != 0 {
				continue
			}
			for _, v := range []int{2, 3} {
				s, err := Interleaved(p, m, v)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func caseName(s *Schedule) string {
	return fmt.Sprintf("%s/p%d_m%d_v%d", s.Name, s.Stages, s.Micro, s.Virtual)
}

// compact writes ops as "F0/1 B2/0", kind chunk/micro-batch.
func compact(ops []Op) string {
	var b []string
	for _, op := range ops {
		b = append(b, fmt.Sprintf("%v%d/%d", op.Kind, op.Chunk, op.MB))
	}
	return strings.Join(b, " ")
}

func TestGeneratorsOrder(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
		want    []string // rank by rank, as compact writes them
	}{
		{"gpipe p2 m3", 2, 3, 1, []string{
			"F0/0 F0/1 F0/2 B0/0 B0/1 B0/2",
			"F1/0 F1/1 F1/2 B1/0 B1/1 B1/2",
		}},
		{"1f1b p3 m4", 3, 4, 1, []string{
			"F0/0 F0/1 F0/2 B0/0 F0/3 B0/1 B0/2 B0/3",
			"F1/0 F1/1 B1/0 F1/2 B1/1 F1/3 B1/2 B1/3",
			"F2/0 B2/0 F2/1 B2/1 F2/2 B2/2 F2/3 B2/3",
		}},
		// Warm-ups of min(p-r-1, m) = 2, 2, 1, 0 forwards.
		{"1f1b p4 m2", 4, 2, 1, []string{
			"F0/0 F0/1 B0/0 B0/1",
			"F1/0 F1/1 B1/0 B1/1",
			"F2/0 F2/1 B2/0 B2/1",
			"F3/0 B3/0 F3/1 B3/1",
		}},
		{"1f1b p1 m3", 1, 3, 1, []string{"F0/0 B0/0 F0/1 B0/1 F0/2 B0/2"}},
		// Rank 0 warms up with 2*(2-0-1) + (2-1)*2 = 4 forwards, rank 1
		// with 2; the k-th forward runs local chunk (k/2)%2 on
		// micro-batch (k/4)*2 + k%2, backwards with the chunks reversed.
		{"interleaved p2 m4 v2", 2, 4, 2, []string{
			"F0/0 F0/1 F2/0 F2/1 F0/2 B2/0 F0/3 B2/1 F2/2 B0/0 F2/3 B0/1 B2/2 B2/3 B0/2 B0/3",
			"F1/0 F1/1 F3/0 B3/0 F3/1 B3/1 F1/2 B1/0 F1/3 B1/1 F3/2 B3/2 F3/3 B3/3 B1/2 B1/3",
		}},
		// m == p: Megatron warms up with every forward.
		{"interleaved p2 m2 v2", 2, 2, 2, []string{
			"F0/0 F0/1 F2/0 F2/1 B2/0 B2/1 B0/0 B0/1",
			"F1/0 F1/1 F3/0 F3/1 B3/0 B3/1 B1/0 B1/1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(strings.Fields(tt.name)[0], tt.p, tt.m, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			for r, want := range tt.want {
				if got := compact(s.Ops[r]); got != want {
					t.Errorf("rank %d:\n got %s\nwant %s", r, got, want)
				}
			}
		})
	}
}

// The papers' figure of 1F1B with 4 stages and 8 micro-batches.
func TestOneFOneBFigure(t *testing.T) {
	s, err := OneFOneB(4, 8)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compact(s.Ops[0][:8]), "F0/0 F0/1 F0/2 F0/3 B0/0 F0/4 B0/1 F0/5"; got != want {
		t.Errorf("stage 0 starts %s, want %s", got, want)
	}
	if got, want := compact(s.Ops[3][:4]), "F3/0 B3/0 F3/1 B3/1"; got != want {
		t.Errorf("stage 3 starts %s, want %s", got, want)
	}
}

func TestInterleavedV1IsOneFOneB(t *testing.T) {
	for _, p := range []int{1, 2, 4} {
		for _, m := range []int{4, 8} {
			a, err := Interleaved(p, m, 1)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := OneFOneB(p, m)
			if a.Name != NameInterleaved || !slices.EqualFunc(a.Ops, b.Ops, slices.Equal) {
				t.Errorf("p=%d m=%d: Interleaved(v=1) = %s %v, want 1f1b's ops %v", p, m, a.Name, a.Ops, b.Ops)
			}
		}
	}
}

func TestBadArguments(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
		want    string
	}{
		{"gpipe", 0, 4, 1, "p = 0 stages; pass p >= 1"},
		{"1f1b", 2, 0, 1, "m = 0 micro-batches; pass m >= 1"},
		{"interleaved", 2, 4, 0, "v = 0 chunks per stage; pass v >= 1"},
		{"interleaved", 4, 6, 2, "m must be a multiple of p, pass m = 4 or 8"},
		{"interleaved", 4, 3, 2, "m must be a multiple of p, pass m = 4"},
		{"gpipe", 2, 4, 2, "only interleaved takes v > 1"},
		{"1f1b", 2, 4, 3, "only interleaved takes v > 1"},
		{"zb-h1", 2, 4, 1, `unknown schedule "zb-h1"; pass "gpipe", "1f1b" or "interleaved"`},
		{"1f1b", 1 << 20, 1 << 20, 1, "operations; pass smaller numbers"},
		{"interleaved", 1 << 40, 1 << 40, 1 << 40, "operations; pass smaller numbers"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s_p%d_m%d_v%d", tt.name, tt.p, tt.m, tt.v), func(t *testing.T) {
			s, err := New(tt.name, tt.p, tt.m, tt.v)
			if !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, %v; want an ErrBadArgument saying %q", s, err, tt.want)
			}
		})
	}
}

func TestValidateGenerated(t *testing.T) {
	for _, s := range grid(t) {
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", caseName(s), err)
		}
	}
}

func TestValidateBroken(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(s *Schedule)
		is     error
		want   string
	}{
		{"missing op", func(s *Schedule) { s.Ops[1] = s.Ops[1][:3] },
			ErrInvalid, "no rank runs B(chunk 1, mb 1) on rank 1"},
		{"duplicated op", func(s *Schedule) { s.Ops[0][3] = s.Ops[0][1] },
			ErrInvalid, "rank 0 runs F(chunk 0, mb 1) twice, as op 1 and op 3"},
		{"op on the wrong rank", func(s *Schedule) { s.Ops[0][0].Chunk = 1 },
			ErrInvalid, "rank 0 op 0: F(chunk 1, mb 0) belongs on rank 1, which holds chunk 1; move it there"},
		{"chunk out of range", func(s *Schedule) { s.Ops[0][0].Chunk = 4 },
			ErrInvalid, "F(chunk 4, mb 0): chunk 4 is out of range; the 2 chunks run from 0 to 1"},
		{"micro-batch out of range", func(s *Schedule) { s.Ops[0][0].MB = -1 },
			ErrInvalid, "micro-batch -1 is out of range"},
		{"bad kind", func(s *Schedule) { s.Ops[0][0].Kind = 0 },
			ErrInvalid, "has kind 0"},
		{"ranks missing", func(s *Schedule) { s.Ops = s.Ops[:1] },
			ErrInvalid, "1 ranks' op lists for 2 stages"},
		{"no stages", func(s *Schedule) { s.Stages = 0 },
			ErrInvalid, "0 stages"},
		{"huge micro-batch count", func(s *Schedule) { s.Micro = 1 << 40 },
			ErrInvalid, "8 ops for 2 stages, 1099511627776 micro-batches"},
		// Rank 1 runs B0 before F0: it waits for its own later op.
		{"backward before its forward", func(s *Schedule) {
			s.Ops[1] = []Op{{Backward, 1, 0}, {Forward, 1, 0}, {Forward, 1, 1}, {Backward, 1, 1}}
		},
			ErrDeadlock, "rank 1's op 0 B(chunk 1, mb 0) waits for F(chunk 1, mb 0), rank 1's op 1"},
		// Rank 0 runs B0 before F1, which rank 1 needs before its B0.
		{"cycle across ranks", func(s *Schedule) {
			s.Ops[0] = []Op{{Forward, 0, 0}, {Backward, 0, 0}, {Forward, 0, 1}, {Backward, 0, 1}}
		},
			ErrDeadlock, "rank 0's op 1 B(chunk 0, mb 0) waits for B(chunk 1, mb 0), rank 1's op 2; rank 1's op 1 F(chunk 1, mb 1) waits for F(chunk 0, mb 1), rank 0's op 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// GPipe, 2 stages, 2 micro-batches: rank r runs
			// F(r,0) F(r,1) B(r,0) B(r,1).
			s, err := GPipe(2, 2)
			if err != nil {
				t.Fatal(err)
			}
			tt.break_(s)
			err = s.Validate()
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v; want %v saying %q", err, tt.is, tt.want)
			}
		})
	}
}

func TestMaxInFlight(t *testing.T) {
	for _, s := range grid(t) {
		p, m, v := s.Stages, s.Micro, s.Virtual
		for r := range p {
			var want int
			switch s.Name {
			case NameGPipe:
				want = m
			case NameOneFOneB:
				want = min(p-r, m)
			case NameInterleaved:
				// Megatron's warm-up forwards plus the steady state's
				// one, unless the warm-up is all of them.
				want = min(InterleavedWarmup(p, m, v, r)+1, m*v)
			}
			if got := s.MaxInFlight(r); got != want {
				t.Errorf("%s: MaxInFlight(%d) = %d, want %d", caseName(s), r, got, want)
			}
		}
		if got := s.MaxInFlight(p); got != 0 {
			t.Errorf("%s: MaxInFlight(%d), past the last rank, = %d, want 0", caseName(s), p, got)
		}
	}
}

// TestInterleavedInFlight reports what interleaving costs in memory: rank
// r holds min(2*(p-r-1) + (v-1)*p + 1, m*v) chunk activations, each 1/v
// of a stage's, against 1F1B's min(p-r, m) stage activations. Rank 0
// with p = 4, m = 8, v = 2 holds 11 half-stage activations, 5.5 stages'
// worth, against 1F1B's 4.
func TestInterleavedInFlight(t *testing.T) {
	for _, tt := range []struct{ p, m, v, r, want int }{
		{4, 8, 2, 0, 11}, {4, 8, 2, 3, 5}, {4, 16, 3, 0, 15}, {4, 4, 2, 0, 8}, {2, 4, 2, 1, 3},
	} {
		s, err := Interleaved(tt.p, tt.m, tt.v)
		if err != nil {
			t.Fatal(err)
		}
		got := s.MaxInFlight(tt.r)
		if got != tt.want {
			t.Errorf("p=%d m=%d v=%d: rank %d holds %d chunk activations, want %d", tt.p, tt.m, tt.v, tt.r, got, tt.want)
		}
		t.Logf("p=%d m=%d v=%d rank %d: %d chunk activations = %.2f stages' worth (1f1b: %d)",
			tt.p, tt.m, tt.v, tt.r, got, float64(got)/float64(tt.v), min(tt.p-tt.r, tt.m))
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Forward: "F", Backward: "B", 0: "Kind(0)", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestChunksRankLocal(t *testing.T) {
	s, err := Interleaved(4, 8, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.Chunks() != 12 {
		t.Errorf("Chunks() = %d, want 12", s.Chunks())
	}
	for c, want := range [][2]int{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 1}, {0, 2}, {1, 2}, {2, 2}, {3, 2}} {
		if r, l := s.Rank(c), s.Local(c); r != want[0] || l != want[1] {
			t.Errorf("chunk %d: Rank, Local = %d, %d, want %d, %d", c, r, l, want[0], want[1])
		}
	}
}

// FuzzValidate checks that Validate, Simulate and Draw return errors,
// never panic, on arbitrary schedules.
func FuzzValidate(f *testing.F) {
	f.Add(uint8(2), uint8(2), uint8(1), []byte{1, 0, 0, 1, 0, 1, 2, 0, 0})
	f.Add(uint8(1), uint8(1), uint8(1), []byte{1, 0, 0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, p, m, v uint8, data []byte) {
		s := &Schedule{Name: "fuzz", Stages: int(p % 5), Micro: int(m % 5), Virtual: int(v % 3), Ops: make([][]Op, p%5)}
		for i := 0; i+2 < len(data) && len(s.Ops) > 0; i += 3 {
			r := i / 3 % len(s.Ops)
			s.Ops[r] = append(s.Ops[r], Op{Kind(data[i] % 4), int(data[i+1]%8) - 1, int(data[i+2]%8) - 1})
		}
		err := s.Validate()
		if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrDeadlock) {
			t.Errorf("Validate = %v, want ErrInvalid or ErrDeadlock", err)
		}
		if derr := s.Draw(&strings.Builder{}); (derr == nil) != (err == nil) {
			t.Errorf("Draw = %v, Validate = %v", derr, err)
		}
	})
}
