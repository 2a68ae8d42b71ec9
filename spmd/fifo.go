package spmd

// fifo is a first-in first-out queue whose pushes and pops take constant
// time, amortized, however long it grows: the engine's queues of posted
// receives, early messages and waiting sends. They were slices popped by
// copying the rest down, which made a long queue quadratic: 1,000,000
// 8-byte messages that one rank sent before the other received them took
// 140 us a receive (each copied the 8 MB of pointers behind it).
//
// The live elements are s[head:]. A pop moves head on (back to the start
// once the queue empties, so its capacity is reused); a push into a full
// slice whose front half or more is popped moves the live part down
// first, else lets append grow it, so an element is moved O(1) times on
// average.
type fifo[T any] struct {
	s    []T
	head int
	// moved counts the elements moved down, for the tests.
	moved int
}

// len returns the number of elements queued.
func (f *fifo[T]) len() int { return len(f.s) - f.head }

// push appends v.
func (f *fifo[T]) push(v T) {
	if len(f.s) == cap(f.s) && f.head > 0 && f.head >= len(f.s)/2 {
		n := copy(f.s, f.s[f.head:])
		clear(f.s[n:])
		f.s, f.head = f.s[:n], 0
		f.moved += n
	}
	f.s = append(f.s, v)
}

// pop removes and returns the first element; the queue must not be empty.
func (f *fifo[T]) pop() T {
	v := f.s[f.head]
	var zero T
	f.s[f.head] = zero
	f.head++
	if f.head == len(f.s) {
		f.s, f.head = f.s[:0], 0
	}
	return v
}

// items returns the queued elements in order; they stay in the queue, and
// the slice is valid until the next change.
func (f *fifo[T]) items() []T { return f.s[f.head:] }

// keep removes, in place and in order, every element for which ok is false.
func (f *fifo[T]) keep(ok func(T) bool) {
	live := f.s[f.head:]
	kept := live[:0]
	for _, v := range live {
		if ok(v) {
			kept = append(kept, v)
		}
	}
	clear(live[len(kept):])
	f.s = f.s[:f.head+len(kept)]
	if f.head == len(f.s) {
		f.s, f.head = f.s[:0], 0
	}
}

// reset empties the queue, keeping its capacity.
func (f *fifo[T]) reset() {
	clear(f.s)
	f.s, f.head = f.s[:0], 0
}
