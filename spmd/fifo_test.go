package spmd

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFifoMatchesSlice runs random pushes, pops, keeps and resets on a
// fifo and on a plain slice, and compares them after every step.
func TestFifoMatchesSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var f fifo[int]
	var want []int
	next := 0
	for step := range 200000 {
		switch op := rng.IntN(100); {
		case op < 55:
			f.push(next)
			want = append(want, next)
			next++
		case op < 97:
			if len(want) == 0 {
				continue
			}
			if got := f.pop(); got != want[0] {
				t.Fatalf("step %d: pop = %d, want %d", step, got, want[0])
			}
			want = want[1:]
		case op < 99:
			m := rng.IntN(3) + 2
			f.keep(func(v int) bool { return v%m != 0 })
			want = slices.DeleteFunc(want, func(v int) bool { return v%m == 0 })
		default:
			f.reset()
			want = want[:0]
		}
		if f.len() != len(want) || !slices.Equal(f.items(), want) {
			t.Fatalf("step %d: fifo holds %v, want %v", step, f.items(), want)
		}
	}
}

// TestFifoLongQueueIsLinear keeps a queue of 100,000 elements in a steady
// state of one push per pop, as a receiver that lags a stream of early
// messages does, and checks that elements are moved a bounded number of
// times each and that popped slots do not keep their values alive. The
// slice popped by copying moved the whole queue at every pop.
func TestFifoLongQueueIsLinear(t *testing.T) {
	const long, ops = 100000, 1000000
	var f fifo[*int]
	for i := range long {
		f.push(&i)
	}
	for i := range ops {
		f.pop()
		f.push(&i)
	}
	if f.len() != long {
		t.Fatalf("len = %d, want %d", f.len(), long)
	}
	if max := 2 * (long + ops); f.moved > max {
		t.Errorf("%d pushes moved elements %d times; want at most %d", long+ops, f.moved, max)
	}
	if cap(f.s) > 4*long {
		t.Errorf("capacity %d for a queue of %d", cap(f.s), long)
	}
	for i, p := range f.s[:f.head] {
		if p != nil {
			t.Fatalf("popped slot %d still holds a value", i)
		}
	}
	for f.len() > 0 {
		f.pop()
	}
	if f.head != 0 || len(f.s) != 0 {
		t.Errorf("an emptied queue kept head %d, length %d", f.head, len(f.s))
	}
}
