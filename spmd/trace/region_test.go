package trace_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// setDefault makes rec the process's recorder until the test ends.
func setDefault(t *testing.T, rec *trace.Recorder) {
	trace.SetDefault(rec)
	t.Cleanup(func() { trace.SetDefault(nil) })
}

func TestRegion(t *testing.T) {
	cases := []struct {
		name string
		// ctx returns the context to start the region under, given the
		// recorder it must land in and another open one.
		ctx func(t *testing.T, rec, other *trace.Recorder) context.Context
	}{
		{"WithRecorder", func(t *testing.T, rec, other *trace.Recorder) context.Context {
			return trace.WithRecorder(context.Background(), rec)
		}},
		{"SetDefault", func(t *testing.T, rec, other *trace.Recorder) context.Context {
			setDefault(t, rec)
			return context.Background()
		}},
		{"WithRecorder over the default", func(t *testing.T, rec, other *trace.Recorder) context.Context {
			setDefault(t, other)
			return trace.WithRecorder(context.Background(), rec)
		}},
		{"the default under a context with other values", func(t *testing.T, rec, other *trace.Recorder) context.Context {
			setDefault(t, rec)
			return trace.WithTrack(context.WithValue(context.Background(), struct{}{}, 1), "")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var clock fakeClock
			rec := newRecorder(t, trace.Header{}, trace.WithClock(clock.now))
			other := newRecorder(t, trace.Header{}, trace.WithClock(clock.now))
			ctx := c.ctx(t, rec, other)
			if got := trace.FromContext(ctx); got != rec {
				t.Errorf("FromContext = %p, want the recorder %p", got, rec)
			}
			clock.set(10_000)
			s := trace.Region(ctx, "forward")
			if s == nil {
				t.Fatal("Region = nil with a recorder open")
			}
			clock.set(12_500)
			s.End()
			f := closeAndRead(t, rec)
			want := []view{{Kind: trace.RegionEvent, Start: 10_000, End: 12_500, Peer: -1, Name: "forward"}}
			if got := eventsOf(f, trace.RegionEvent); !slices.Equal(got, want) {
				t.Errorf("regions:\n got %+v\nwant %+v", got, want)
			}
			// The heap is sampled at the start; the end is too soon after.
			mem := eventsOf(f, trace.MemoryEvent)
			if len(mem) != 1 || mem[0].Start != 10_000 || mem[0].End != 10_000 || mem[0].Bytes <= 0 {
				t.Errorf("heap samples %+v, want one at 10000 with the bytes in use", mem)
			}
			if o := closeAndRead(t, other); len(o.Events) != 0 {
				t.Errorf("the other recorder got %d events", len(o.Events))
			}
		})
	}
}

func TestRegionNesting(t *testing.T) {
	var clock fakeClock
	rec := newRecorder(t, trace.Header{}, trace.WithClock(clock.now))
	ctx := trace.WithRecorder(context.Background(), rec)
	clock.set(100)
	outer := trace.Region(ctx, "step")
	clock.set(200)
	inner := trace.Region(ctx, "forward")
	clock.set(300)
	innermost := trace.Region(ctx, "layer 0")
	clock.set(350)
	innermost.End()
	clock.set(400)
	inner.End()
	clock.set(500)
	outer.End()
	f := closeAndRead(t, rec)
	// Written as they end: innermost first, each starting after the one
	// written before it.
	want := []view{
		{Kind: trace.RegionEvent, Start: 300, End: 350, Peer: -1, Name: "layer 0"},
		{Kind: trace.RegionEvent, Start: 200, End: 400, Peer: -1, Name: "forward"},
		{Kind: trace.RegionEvent, Start: 100, End: 500, Peer: -1, Name: "step"},
	}
	got := eventsOf(f, trace.RegionEvent)
	if !slices.Equal(got, want) {
		t.Fatalf("regions:\n got %+v\nwant %+v", got, want)
	}
	for i := 1; i < len(got); i++ {
		if in, out := got[i-1], got[i]; in.Start < out.Start || in.End > out.End || in.Track != out.Track {
			t.Errorf("%q [%d, %d] is not inside %q [%d, %d] on its track", in.Name, in.Start, in.End, out.Name, out.Start, out.End)
		}
	}
}

func TestWithTrack(t *testing.T) {
	cases := []struct {
		name string
		ctx  func(context.Context) context.Context
		want string
	}{
		{"main by default", func(ctx context.Context) context.Context { return ctx }, ""},
		{"named", func(ctx context.Context) context.Context { return trace.WithTrack(ctx, "loader") }, "loader"},
		{"innermost wins", func(ctx context.Context) context.Context {
			return trace.WithTrack(trace.WithTrack(ctx, "loader"), "comm")
		}, "comm"},
		{"named before the recorder", func(ctx context.Context) context.Context {
			return trace.WithRecorder(trace.WithTrack(context.Background(), "early"), trace.FromContext(ctx))
		}, "early"},
		{"empty is main", func(ctx context.Context) context.Context { return trace.WithTrack(ctx, "") }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder(t, trace.Header{})
			trace.Region(c.ctx(trace.WithRecorder(context.Background(), rec)), "fetch").End()
			f := closeAndRead(t, rec)
			regions := eventsOf(f, trace.RegionEvent)
			if len(regions) != 1 || regions[0].Name != "fetch" || regions[0].Track != c.want {
				t.Errorf("regions %+v, want one named fetch on track %q", regions, c.want)
			}
			for _, e := range f.Events {
				if e.Kind == trace.RegionEvent && c.want == "" && e.Track != 0 {
					t.Errorf("the main track is string %d, want 0", e.Track)
				}
			}
		})
	}
}

// TestRegionOff checks that with no recorder open, Region returns nil and
// ending nil is harmless. It fails if a test before it left one open.
func TestRegionOff(t *testing.T) {
	rec, err := trace.New(t.TempDir(), trace.Header{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	trace.SetDefault(rec)
	t.Cleanup(func() { trace.SetDefault(nil) })
	if s := trace.Region(context.Background(), "on"); s == nil {
		t.Fatal("Region = nil with a default recorder")
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if d := trace.Default(); d != nil {
		t.Errorf("Default() = %p after its recorder closed, want nil", d)
	}
	cases := []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"a closed recorder", trace.WithRecorder(context.Background(), rec)},
		{"a track", trace.WithTrack(context.Background(), "loader")},
	}
	for _, c := range cases {
		if s := trace.Region(c.ctx, "off"); s != nil {
			t.Errorf("%s: Region = %+v with no recorder open, want nil", c.name, s)
		}
		if r := trace.FromContext(c.ctx); r != nil {
			t.Errorf("%s: FromContext = %p with no recorder open, want nil", c.name, r)
		}
	}
	var s *trace.Span
	s.End()
	trace.Region(context.Background(), "off").End()
}

// TestHeapSamples drives the clock through region boundaries and checks
// when the heap is sampled: at a boundary, unless the last sample is less
// than HeapEvery old.
func TestHeapSamples(t *testing.T) {
	const t0, h = 1000, trace.HeapEvery
	cases := []struct {
		name    string
		regions [][2]int64 // start and end of each region, one after the other
		want    []int64    // the sample times
	}{
		{"one short region", [][2]int64{{t0, t0 + h - 1}}, []int64{t0}},
		{"one region of exactly HeapEvery", [][2]int64{{t0, t0 + h}}, []int64{t0, t0 + h}},
		{"one long region", [][2]int64{{t0, t0 + 5*h}}, []int64{t0, t0 + 5*h}},
		{"short regions", [][2]int64{
			{t0, t0 + h/4}, {t0 + h/2, t0 + 3*h/4}, {t0 + h, t0 + 5*h/4}, {t0 + 3*h/2, t0 + 2*h - 1}, {t0 + 2*h, t0 + 2*h},
		}, []int64{t0, t0 + h, t0 + 2*h}},
		{"a boundary stamped before the last sample", [][2]int64{{t0 + h, t0 + h}, {t0, t0}}, []int64{t0 + h}},
		{"a negative clock", [][2]int64{{-5 * h, -5*h + 1}, {-3 * h, -h}}, []int64{-5 * h, -3 * h, -h}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var clock fakeClock
			rec := newRecorder(t, trace.Header{}, trace.WithClock(clock.now))
			ctx := trace.WithRecorder(context.Background(), rec)
			for _, r := range c.regions {
				clock.set(r[0])
				s := trace.Region(ctx, "r")
				clock.set(r[1])
				s.End()
			}
			f := closeAndRead(t, rec)
			var got []int64
			for _, m := range eventsOf(f, trace.MemoryEvent) {
				if m.Bytes <= 0 || m.End != m.Start {
					t.Errorf("heap sample %+v, want an instant with the bytes in use", m)
				}
				got = append(got, m.Start)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("samples at %v, want %v", got, c.want)
			}
		})
	}
}

// TestHeapSamplesRealClock checks the samples' spacing on the recorder's
// own clock, over many regions.
func TestHeapSamplesRealClock(t *testing.T) {
	rec := newRecorder(t, trace.Header{})
	ctx := trace.WithRecorder(context.Background(), rec)
	for range 2000 {
		trace.Region(ctx, "tiny").End()
	}
	f := closeAndRead(t, rec)
	mem := eventsOf(f, trace.MemoryEvent)
	if len(mem) == 0 {
		t.Fatal("no heap samples")
	}
	regions := eventsOf(f, trace.RegionEvent)
	if len(regions) != 2000 || mem[0].Start != regions[0].Start {
		t.Errorf("%d regions, the first at %d, the first sample at %d; want 2000 and a sample at the first start", len(regions), regions[0].Start, mem[0].Start)
	}
	for i, m := range mem {
		if m.Bytes <= 0 {
			t.Errorf("heap sample %d: %d bytes", i, m.Bytes)
		}
		if i > 0 && m.Start-mem[i-1].Start < trace.HeapEvery {
			t.Errorf("heap samples %d and %d are %d ns apart, less than %d", i-1, i, m.Start-mem[i-1].Start, trace.HeapEvery)
		}
	}
}

func TestWithClock(t *testing.T) {
	const skew = 5 * time.Second
	base := time.Now()
	rec := newRecorder(t, trace.Header{}, trace.WithClock(func() time.Duration { return time.Since(base) + skew }))
	if now := rec.Now(); now < int64(skew) {
		t.Errorf("Now() = %d, want at least %d", now, skew)
	}
	start := rec.Now()
	rec.Record(trace.Event{Kind: trace.SendEvent, Start: start, Peer: 0}, "", "")
	trace.Region(trace.WithRecorder(context.Background(), rec), "skewed").End()
	f := closeAndRead(t, rec)
	elapsed := time.Since(base)
	lo, hi := int64(skew), int64(skew+elapsed)
	if len(f.Events) < 2 {
		t.Fatalf("%d events", len(f.Events))
	}
	for _, e := range f.Events {
		if e.Start < lo || e.End > hi || e.End < e.Start {
			t.Errorf("%s event [%d, %d] is not within [%d, %d], the skewed clock's reading", e.Kind, e.Start, e.End, lo, hi)
		}
	}
	if f.End < lo || f.End > hi {
		t.Errorf("the end record's time %d is not within [%d, %d]", f.End, lo, hi)
	}
}

func TestHeapSampleAtTimeZero(t *testing.T) {
	var clock fakeClock // reads 0
	rec := newRecorder(t, trace.Header{}, trace.WithClock(clock.now))
	ctx := trace.WithRecorder(context.Background(), rec)
	trace.Region(ctx, "a").End()
	trace.Region(ctx, "b").End()
	if mem := eventsOf(closeAndRead(t, rec), trace.MemoryEvent); len(mem) != 1 {
		t.Errorf("%d heap samples at time 0, want 1 in a HeapEvery", len(mem))
	}
}
