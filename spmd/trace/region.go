package trace

import (
	"context"
	"runtime/metrics"
	"sync/atomic"
)

// open counts the recorders open in this process, so that Region costs
// one atomic load when profiling is off.
var open atomic.Int32

// def is the process's recorder, set by spmd.Init when profiling: the
// one Region records into when ctx names none.
var def atomic.Pointer[Recorder]

func opened(*Recorder) { open.Add(1) }

func closed(r *Recorder) {
	open.Add(-1)
	def.CompareAndSwap(r, nil)
}

// SetDefault makes r the recorder of regions whose context names none
// (spmd.Init does this when profiling). nil clears it.
func SetDefault(r *Recorder) { def.Store(r) }

// Default returns the process's recorder, or nil.
func Default() *Recorder { return def.Load() }

type recorderKey struct{}
type trackKey struct{}

// WithRecorder returns ctx carrying r: regions started under it are
// recorded in r. Tests that run several ranks in one process use it.
func WithRecorder(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// FromContext returns the recorder ctx carries, else the process's.
func FromContext(ctx context.Context) *Recorder {
	if open.Load() == 0 {
		return nil
	}
	if ctx != nil {
		if r, ok := ctx.Value(recorderKey{}).(*Recorder); ok {
			return r
		}
	}
	return def.Load()
}

// WithTrack returns ctx naming the track (a thread of activity: "loader",
// "comm") that regions started under it are drawn on; the default is
// "main".
func WithTrack(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, trackKey{}, name)
}

// Span is a region in progress; End ends it. A nil *Span (profiling off)
// does nothing.
type Span struct {
	r     *Recorder
	name  string
	track string
	start int64
}

// Region starts a region named name (forward, backward, step 12, ...) and
// returns it; End records it: defer trace.Region(ctx, "forward").End().
// Regions nest: one started inside another's span on the same track is its
// child. The heap in use is sampled at both ends. With profiling off it
// returns nil after one atomic load.
func Region(ctx context.Context, name string) *Span {
	if open.Load() == 0 {
		return nil
	}
	r := FromContext(ctx)
	if r == nil {
		return nil
	}
	s := &Span{r: r, name: name}
	if ctx != nil {
		s.track, _ = ctx.Value(trackKey{}).(string)
	}
	s.start = r.Now()
	r.sampleHeap(s.start)
	return s
}

// End records the region.
func (s *Span) End() {
	if s == nil {
		return
	}
	r := s.r
	end := r.Now()
	r.mu.Lock()
	e := Event{Kind: RegionEvent, Start: s.start, End: end, Peer: -1, Name: r.internLocked(s.name)}
	if s.track != "" {
		e.Track = r.internLocked(s.track)
	}
	r.recordLocked(&e)
	r.mu.Unlock()
	r.sampleHeap(end)
}

// heapEvery is the least time between two heap samples: reading the
// runtime's metrics costs a quarter of a microsecond.
const heapEvery = 100_000 // ns

// sampleHeap records the heap in use at t, unless one was taken less than
// heapEvery ago.
func (r *Recorder) sampleHeap(t int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sampled && t-r.lastMem < heapEvery {
		return
	}
	r.lastMem, r.sampled = t, true
	if r.heap == nil {
		r.heap = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	}
	metrics.Read(r.heap)
	var heap int64
	if r.heap[0].Value.Kind() == metrics.KindUint64 {
		heap = int64(r.heap[0].Value.Uint64())
	}
	e := Event{Kind: MemoryEvent, Start: t, End: t, Peer: -1, Bytes: heap}
	r.recordLocked(&e)
}
