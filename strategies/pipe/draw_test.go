package pipe

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestDrawGolden(t *testing.T) {
	tests := []struct {
		name    string
		p, m, v int
	}{
		{"gpipe", 4, 8, 1},
		{"1f1b", 4, 8, 1},
		{"1f1b", 2, 4, 1},
		{"1f1b", 4, 2, 1},
		{"1f1b", 1, 3, 1},
		{"interleaved", 4, 8, 2},
		{"interleaved", 2, 4, 3},
		{"interleaved", 4, 4, 2},
		{"gpipe", 11, 2, 1}, // two-digit stage numbers
		{"1f1b", 2, 12, 1},  // three-character labels
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s_p%d_m%d", tt.name, tt.p, tt.m)
		if tt.v > 1 {
			name += fmt.Sprintf("_v%d", tt.v)
		}
		t.Run(name, func(t *testing.T) {
			s, err := New(tt.name, tt.p, tt.m, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := s.Draw(&b); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".golden"), b.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestDrawColumns checks the table's shape: fixed-width cells, as many on
// each row as the makespan has time slots.
func TestDrawColumns(t *testing.T) {
	for _, s := range grid(t) {
		var b strings.Builder
		if err := s.Draw(&b); err != nil {
			t.Fatalf("%s: %v", caseName(s), err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) != s.Stages+1 {
			t.Fatalf("%s: %d lines, want a heading and %d rows", caseName(s), len(lines), s.Stages)
		}
		tl, _ := s.Simulate(UniformCosts(1, 2))
		for r, line := range lines[1:] {
			_, cells, _ := strings.Cut(line, "|")
			if n := len(strings.Fields(cells)); n != int(tl.Makespan) {
				t.Errorf("%s: stage %d has %d cells, want %v", caseName(s), r, n, tl.Makespan)
			}
		}
	}
}

func TestDrawInvalid(t *testing.T) {
	s, err := GPipe(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	s.Ops[0] = s.Ops[0][1:]
	var b bytes.Buffer
	if err := s.Draw(&b); !errors.Is(err, ErrInvalid) || b.Len() != 0 {
		t.Errorf("Draw of a schedule missing an op = %v and wrote %q; want ErrInvalid and nothing", err, b.String())
	}
}

type failWriter struct{}

var errWrite = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestDrawWriteError(t *testing.T) {
	s, err := OneFOneB(2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Draw(failWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("Draw to a failing writer = %v, want %v", err, errWrite)
	}
}

func TestLabel(t *testing.T) {
	tests := []struct {
		v    int
		op   Op
		want string
	}{
		{1, Op{Forward, 1, 3}, "F3"},
		{1, Op{Backward, 0, 12}, "B12"},
		{2, Op{Forward, 0, 3}, "F3a"},
		{2, Op{Backward, 3, 3}, "B3b"},
		{27, Op{Forward, 2*26 + 1, 0}, "F0:27"},
	}
	for _, tt := range tests {
		s := &Schedule{Stages: 2, Micro: 16, Virtual: tt.v}
		if got := s.label(tt.op); got != tt.want {
			t.Errorf("v=%d: label(%v) = %q, want %q", tt.v, tt.op, got, tt.want)
		}
	}
}

func ExampleOneFOneB() {
	s, err := OneFOneB(3, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Draw(os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 1f1b: 3 stages, 4 micro-batches (F = forward, B = backward; 1 column = one forward's time, a backward takes 2, . = idle; bubble 33.3%)
	// stage 0 | F0 F1 F2 .  .  .  .  B0 B0 F3 B1 B1 .  B2 B2 .  B3 B3
	// stage 1 | .  F0 F1 .  .  B0 B0 F2 B1 B1 F3 B2 B2 .  B3 B3 .  .
	// stage 2 | .  .  F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 .  .  .  .
}
