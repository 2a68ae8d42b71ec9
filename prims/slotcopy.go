package prims

import (
	"time"

	"github.com/gorun-hpc/gorun/prims/kernel"
	"github.com/gorun-hpc/gorun/spmd"
)

// slotWriter copies a rank's data into the area, where the other ranks
// read it next, either with plain stores or past the caches
// (kernel.Stream), whichever runs faster on the host now.
//
// A plain store to a line of a slot must first take back the copies that
// the readers of the slot's last round hold. Where the cores of the ranks
// share a cache, that is cheap, and the readers find the data in it; where
// they share none, each line crosses between the caches twice. The 2
// vCPUs of the VM this was measured on are now one, now the other, from
// one minute to the next (a cache line's round trip between them 50 ns,
// then 330 ns):
//
//	Shared all-reduce of 16 MiB, ms        np 2       np 4
//	plain stores, cores share a cache     1.8-2.3    4.9-6.5
//	plain stores, no shared cache         8.9-9.0    15-16.5
//	streamed, cores share a cache         2.7-3.4    6.8-8.1
//	streamed, no shared cache             1.8-1.9    6.0
//	as slotWriter decides, shared cache   1.7-1.9    5.0-6.4
//	as slotWriter decides, none           -          7.8
//
// At np 8, plain stores took 11-14 ms with a shared cache and 30 ms
// without; as slotWriter decides, 11 and 14-15 ms.
//
// Neither kind wins both, and a probe at start-up would not follow the
// host, so the writer measures: every copy of streamMin bytes or more
// times the kind it uses, and every sampleEvery-th copy starts with
// samplePiece bytes of the other kind, timed too. It streams while the
// streamed bytes run streamRatio times faster than the plain ones: the
// plain ones ran at 14.5-17 GB/s with a shared cache and 2.3-2.8 GB/s
// without, the streamed ones at 12-21 GB/s either way. Which kind a rank
// uses changes how fast the others read, never what they read, so each
// rank decides alone.
type slotWriter struct {
	plain, stream float64 // bytes per nanosecond, moving averages; 0: not measured
	n             uint32  // copies of streamMin bytes or more
}

const (
	// streamMin is the smallest copy worth measuring and streaming.
	streamMin = 16 << 10
	// sampleEvery and samplePiece: how often, and how much, the kind not
	// in use is timed. Sampling plain stores costs about 12 us per 16
	// copies where they are slow, 2% of a 256 KiB round.
	sampleEvery = 16
	samplePiece = 16 << 10
	// streamRatio is how much faster streaming must run to be chosen.
	streamRatio = 2.5
)

// streaming says whether w streams now.
func (w *slotWriter) streaming() bool {
	return w.stream > streamRatio*w.plain && w.plain > 0
}

// toSlot copies src into dst, a slot or cast of the area, as w decides.
func toSlot[T spmd.Number](w *slotWriter, dst, src []T) {
	size := sizeOf[T]()
	if len(src)*size < streamMin || len(dst) < len(src) {
		copy(dst, src)
		return
	}
	stream := w.streaming()
	w.n++
	if len(src)*size >= 2*samplePiece && (w.n%sampleEvery == 1 || w.plain == 0 || w.stream == 0) {
		// Sample the other kind on the head of the copy (either kind
		// first, while one is unmeasured).
		k := samplePiece / size
		other := !stream
		if w.plain == 0 {
			other = false
		} else if w.stream == 0 {
			other = true
		}
		timedCopy(w, other, dst[:k], src[:k])
		dst, src = dst[k:], src[k:]
	}
	timedCopy(w, stream, dst, src)
}

// timedCopy copies with plain stores or streamed, and folds the speed of
// the copy into w's average of that kind. The averages are of speeds, not
// times, so that a copy the scheduler stopped in the middle (ranks share
// cores) pulls its kind's average down by a bounded share only.
func timedCopy[T spmd.Number](w *slotWriter, stream bool, dst, src []T) {
	if len(src) == 0 {
		return
	}
	t := time.Now()
	if stream {
		kernel.Stream(dst, src)
	} else {
		copy(dst, src)
	}
	ns := float64(time.Since(t))
	w.note(stream, float64(len(src)*sizeOf[T]())/max(ns, 1))
}

// note folds the speed of a copy, in bytes per nanosecond, into the
// average of its kind.
func (w *slotWriter) note(stream bool, speed float64) {
	avg := &w.plain
	if stream {
		avg = &w.stream
	}
	if *avg == 0 {
		*avg = speed
	} else {
		*avg += (speed - *avg) / 8
	}
}
