package prims

import "testing"

// TestSlotWriterCopies checks that toSlot copies exactly what copy does,
// whatever the writer has measured: before any measurement (both kinds
// sampled first), streaming, not streaming, on the sampling copy and the
// ones between, for lengths around streamMin and 2*samplePiece.
func TestSlotWriterCopies(t *testing.T) {
	const most = 3*samplePiece/4 + 97 // float32 elements: 3 sample pieces and change
	src := make([]float32, most+5)
	for i := range src {
		src[i] = float32(i) + 0.25
	}
	dst := make([]float32, most+9)
	states := map[string]slotWriter{
		"fresh":     {},
		"plain":     {plain: 10, stream: 10},
		"streaming": {plain: 1, stream: 10},
	}
	for name, st := range states {
		w := st
		for _, n := range []int{0, 1, 31, streamMin/4 - 1, streamMin / 4, streamMin/4 + 3, 2*samplePiece/4 - 1, 2 * samplePiece / 4, most} {
			for rep := 0; rep < sampleEvery+1; rep++ { // through a sampling copy
				for i := range dst {
					dst[i] = -1
				}
				toSlot(&w, dst[3:3+n], src[1:1+n])
				for i := range dst {
					want := float32(-1)
					if i >= 3 && i < 3+n {
						want = src[i-2]
					}
					if dst[i] != want {
						t.Fatalf("%s writer, %d elements, copy %d: dst[%d] = %v, want %v", name, n, rep, i, dst[i], want)
					}
				}
			}
		}
		// Every kind was timed: the one in use on every copy, the other
		// on the sampling copies.
		if w.plain == st.plain || w.stream == st.stream {
			t.Errorf("%s writer: after %d copies the speeds are plain %v, stream %v (from %v, %v): want both measured", name, w.n, w.plain, w.stream, st.plain, st.stream)
		}
	}
}

// TestSlotWriterChooses checks the rule: stream only while streamed copies
// run more than streamRatio times as fast as plain ones, both measured.
func TestSlotWriterChooses(t *testing.T) {
	for _, c := range []struct {
		plain, stream float64
		want          bool
	}{
		{0, 0, false},
		{0, 20, false},
		{20, 0, false},
		{2.3, 21, true}, // cores that share no cache (slotWriter's table)
		{16, 20, false}, // cores that share one
		{4, 4*streamRatio + 0.1, true},
		{4, 4*streamRatio - 0.1, false},
	} {
		w := slotWriter{plain: c.plain, stream: c.stream}
		if got := w.streaming(); got != c.want {
			t.Errorf("plain %v GB/s, streamed %v GB/s: streaming() = %v, want %v", c.plain, c.stream, got, c.want)
		}
	}
}

// TestSlotWriterFollows feeds the writer speeds as timedCopy does and
// checks that it turns to streaming once plain copies slow down, and back
// once they recover, within a few samples of each.
func TestSlotWriterFollows(t *testing.T) {
	w := slotWriter{plain: 16, stream: 20}
	feed := func(speed float64, n int) {
		for range n {
			w.note(false, speed)
		}
	}
	feed(2.5, 10)
	if !w.streaming() {
		t.Fatalf("plain copies slowed to 2.5 GB/s, averaged %.2f: not streaming", w.plain)
	}
	feed(16, 10)
	if w.streaming() {
		t.Fatalf("plain copies back at 16 GB/s, averaged %.2f: still streaming", w.plain)
	}
}
