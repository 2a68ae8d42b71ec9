package trace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

func TestRoundTrip(t *testing.T) {
	var clock fakeClock
	clock.set(1000)
	dir := filepath.Join(t.TempDir(), "profile", "nested") // New creates it
	h := trace.Header{Rank: 2, Size: 4, Job: "job-7", Host: "node3", Pid: 4321, Program: "train -lr 0.1"}
	before := time.Now()
	rec, err := trace.New(dir, h, trace.WithClock(clock.now))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	if got, want := rec.Path(), filepath.Join(dir, "rank.2.trace"); got != want {
		t.Errorf("Path() = %q, want %q", got, want)
	}

	world, pair := []int{0, 1, 2, 3}, []int{3, 1}
	rec.Comm(0, world)
	rec.Comm(5, pair)
	rec.Comm(9, nil)
	rec.SetClock(-1500*time.Microsecond, 42*time.Microsecond)
	async := rec.Intern("comm 5 async")
	if again := rec.Intern("comm 5 async"); again != async {
		t.Errorf("Intern of the same string: ids %d then %d", async, again)
	}
	if id := rec.Intern(""); id != 0 {
		t.Errorf(`Intern("") = %d, want 0`, id)
	}
	pre := rec.Intern("preinterned")
	site := rec.Site()
	if site == 0 {
		t.Fatal("Site() = 0 on an open recorder")
	}

	cases := []struct {
		name       string
		e          trace.Event
		name_, alg string // Record's name and algo arguments
		want       view   // Site "*" stands for site's string
	}{
		{
			name: "send",
			e:    trace.Event{Kind: trace.SendEvent, Start: 100, End: 250, Comm: 5, Peer: 3, Tag: 7, Bytes: 4096, Site: site},
			want: view{Kind: trace.SendEvent, Start: 100, End: 250, Comm: 5, Peer: 3, Tag: 7, Bytes: 4096, Site: "*"},
		},
		{
			name: "failed non-blocking recv of nothing",
			e:    trace.Event{Kind: trace.RecvEvent, Flags: trace.NonBlocking | trace.Failed, Start: 300, End: 300, Peer: 0, Tag: -2},
			want: view{Kind: trace.RecvEvent, Flags: trace.NonBlocking | trace.Failed, Start: 300, End: 300, Peer: 0, Tag: -2},
		},
		{
			name: "wait",
			e:    trace.Event{Kind: trace.WaitEvent, Start: 260, End: 900, Comm: 5, Peer: 1, Tag: 7, Bytes: 12, Site: site},
			want: view{Kind: trace.WaitEvent, Start: 260, End: 900, Comm: 5, Peer: 1, Tag: 7, Bytes: 12, Site: "*"},
		},
		{
			name:  "non-blocking collective on a track",
			e:     trace.Event{Kind: trace.CollectiveEvent, Flags: trace.NonBlocking, Track: async, Start: 400, End: 1400, Comm: 5, Peer: 99, Tag: 3, Bytes: 1 << 20, Seq: 0, Predicted: 950, Site: site},
			name_: "allreduce", alg: "ring",
			want: view{Kind: trace.CollectiveEvent, Flags: trace.NonBlocking, Track: "comm 5 async", Start: 400, End: 1400, Comm: 5, Peer: -1, Bytes: 1 << 20, Predicted: 950, Name: "allreduce", Algo: "ring", Site: "*"},
		},
		{
			name:  "failed collective, negative prediction dropped",
			e:     trace.Event{Kind: trace.CollectiveEvent, Flags: trace.Failed, Start: 1500, End: 1600, Peer: -1, Seq: 1, Predicted: -5},
			name_: "barrier", alg: "dissemination",
			want: view{Kind: trace.CollectiveEvent, Flags: trace.Failed, Start: 1500, End: 1600, Peer: -1, Seq: 1, Name: "barrier", Algo: "dissemination"},
		},
		{
			name: "region named by an interned id",
			e:    trace.Event{Kind: trace.RegionEvent, Start: 1700, End: 1800, Peer: -1, Name: pre, Track: async},
			want: view{Kind: trace.RegionEvent, Start: 1700, End: 1800, Peer: -1, Name: "preinterned", Track: "comm 5 async"},
		},
		{
			name:  "Record's name replaces the event's",
			e:     trace.Event{Kind: trace.RegionEvent, Start: 1750, End: 1760, Peer: -1, Name: pre},
			name_: "forward",
			want:  view{Kind: trace.RegionEvent, Start: 1750, End: 1760, Peer: -1, Name: "forward"},
		},
		{
			name: "memory",
			e:    trace.Event{Kind: trace.MemoryEvent, Start: 1900, End: 1900, Peer: -1, Bytes: 123456789},
			want: view{Kind: trace.MemoryEvent, Start: 1900, End: 1900, Peer: -1, Bytes: 123456789},
		},
		{
			name: "recorded after, started before all",
			e:    trace.Event{Kind: trace.SendEvent, Start: 50, End: 2000, Peer: 2, Bytes: 1},
			want: view{Kind: trace.SendEvent, Start: 50, End: 2000, Peer: 2, Bytes: 1},
		},
		{
			name: "negative times (a clock behind rank 0's)",
			e:    trace.Event{Kind: trace.RecvEvent, Start: -700, End: -100, Peer: 1},
			want: view{Kind: trace.RecvEvent, Start: -700, End: -100, Peer: 1},
		},
		{
			name: "end before start is clamped to the start",
			e:    trace.Event{Kind: trace.RegionEvent, Start: 3000, End: 2500, Peer: -1, Name: pre},
			want: view{Kind: trace.RegionEvent, Start: 3000, End: 3000, Peer: -1, Name: "preinterned"},
		},
		{
			name: "fields a kind does not carry are dropped",
			e:    trace.Event{Kind: trace.RegionEvent, Start: 3100, End: 3200, Comm: 3, Peer: 2, Tag: 1, Bytes: 10, Seq: 4, Predicted: 9, Algo: pre, Site: site, Name: pre},
			want: view{Kind: trace.RegionEvent, Start: 3100, End: 3200, Peer: -1, Name: "preinterned"},
		},
		{
			name: "memory carries only its bytes",
			e:    trace.Event{Kind: trace.MemoryEvent, Start: 3300, End: 3300, Comm: 3, Peer: 2, Name: pre, Site: site, Bytes: 77},
			want: view{Kind: trace.MemoryEvent, Start: 3300, End: 3300, Peer: -1, Bytes: 77},
		},
		{
			name: "extreme values",
			e: trace.Event{Kind: trace.SendEvent, Start: 1 << 40, End: 1<<40 + 1<<39, Comm: math.MaxUint32,
				Peer: math.MinInt32, Tag: math.MaxInt32, Bytes: math.MaxInt64},
			want: view{Kind: trace.SendEvent, Start: 1 << 40, End: 1<<40 + 1<<39, Comm: math.MaxUint32,
				Peer: math.MinInt32, Tag: math.MaxInt32, Bytes: math.MaxInt64},
		},
		{
			name:  "collective with the largest counts",
			e:     trace.Event{Kind: trace.CollectiveEvent, Start: 4000, End: 4001, Comm: 9, Bytes: math.MaxInt64, Seq: math.MaxUint64, Predicted: math.MaxInt64},
			name_: "allreduce", alg: "ring",
			want: view{Kind: trace.CollectiveEvent, Start: 4000, End: 4001, Comm: 9, Peer: -1, Bytes: math.MaxInt64, Seq: math.MaxUint64, Predicted: math.MaxInt64, Name: "allreduce", Algo: "ring"},
		},
	}
	for _, c := range cases {
		rec.Record(c.e, c.name_, c.alg)
	}
	// A zero End is stamped with the clock.
	clock.set(5000)
	rec.Record(trace.Event{Kind: trace.RegionEvent, Start: 4500, Peer: -1}, "stamped", "")
	clock.set(7777)
	f := closeAndRead(t, rec)

	siteName := f.Str(site)
	if !strings.Contains(siteName, "recorder_test.go:") {
		t.Errorf("the site's string %q does not name recorder_test.go", siteName)
	}
	if got, want := len(f.Events), len(cases)+1; got != want {
		t.Fatalf("%d events, want %d", got, want)
	}
	for i, c := range cases {
		want := c.want
		if want.Site == "*" {
			want.Site = siteName
		}
		if got := viewOf(f, f.Events[i]); got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, want)
		}
	}
	stamped := viewOf(f, f.Events[len(cases)])
	if want := (view{Kind: trace.RegionEvent, Start: 4500, End: 5000, Peer: -1, Name: "stamped"}); stamped != want {
		t.Errorf("event with a zero End:\n got %+v\nwant %+v", stamped, want)
	}

	if f.Written != uint64(len(cases)+1) || !f.Done || f.End != 7777 {
		t.Errorf("end record: Written %d, Done %v, End %d; want %d, true, 7777", f.Written, f.Done, f.End, len(cases)+1)
	}
	if f.Offset != -1500_000 || f.RTT != 42_000 {
		t.Errorf("clock: Offset %d, RTT %d; want -1500000, 42000", f.Offset, f.RTT)
	}
	wantComms := map[uint32][]int{0: world, 5: pair, 9: nil}
	if len(f.Comms) != len(wantComms) {
		t.Errorf("Comms = %v, want %v", f.Comms, wantComms)
	}
	for id, m := range wantComms {
		if got, ok := f.Comms[id]; !ok || !slices.Equal(got, m) {
			t.Errorf("Comms[%d] = %v (present %v), want %v", id, got, ok, m)
		}
	}

	hd := f.Header
	if hd.Version != trace.Version || hd.Rank != 2 || hd.Size != 4 || hd.Job != "job-7" || hd.Host != "node3" || hd.Pid != 4321 || hd.Program != "train -lr 0.1" {
		t.Errorf("Header = %+v", hd)
	}
	if hd.Start.Before(before.Round(0)) || hd.Start.After(after.Round(0)) {
		t.Errorf("Header.Start %v is not between %v and %v, when New ran", hd.Start, before, after)
	}

	if f.Strings[0] != "" || f.Str(0) != "" || f.Str(uint32(len(f.Strings))) != "" || f.Str(math.MaxUint32) != "" {
		t.Errorf("Str: id 0 is %q, undefined ids give %q and %q; want all empty", f.Str(0), f.Str(uint32(len(f.Strings))), f.Str(math.MaxUint32))
	}
	for _, s := range []string{"comm 5 async", "preinterned", "allreduce", "ring", "barrier", "dissemination", "forward", "stamped", siteName} {
		if n := strings.Count("\x00"+strings.Join(f.Strings, "\x00")+"\x00", "\x00"+s+"\x00"); n != 1 {
			t.Errorf("string %q is in the file %d times, want once", s, n)
		}
	}
}

func TestNewHeader(t *testing.T) {
	cases := []struct {
		name    string
		h       trace.Header
		wantPid int
	}{
		{"pid given", trace.Header{Rank: 0, Size: 1, Pid: 77}, 77},
		{"pid filled in", trace.Header{Rank: 1, Size: 2}, os.Getpid()},
		{"version and start are the recorder's", trace.Header{Rank: 0, Size: 1, Version: 9, Start: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)}, os.Getpid()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := time.Now()
			rec := newRecorder(t, c.h)
			after := time.Now()
			if want := trace.FileName(c.h.Rank); filepath.Base(rec.Path()) != want {
				t.Errorf("Path() = %s, want a file named %s", rec.Path(), want)
			}
			hd := closeAndRead(t, rec).Header
			if hd.Version != trace.Version || hd.Rank != c.h.Rank || hd.Size != c.h.Size || hd.Pid != c.wantPid {
				t.Errorf("Header = %+v, want version %d, rank %d, size %d, pid %d", hd, trace.Version, c.h.Rank, c.h.Size, c.wantPid)
			}
			if hd.Start.Before(before.Round(0)) || hd.Start.After(after.Round(0)) {
				t.Errorf("Header.Start %v is not between %v and %v, when New ran", hd.Start, before, after)
			}
		})
	}
}

func TestFileName(t *testing.T) {
	for rank, want := range map[int]string{0: "rank.0.trace", 7: "rank.7.trace", 1023: "rank.1023.trace"} {
		if got := trace.FileName(rank); got != want {
			t.Errorf("FileName(%d) = %q, want %q", rank, got, want)
		}
	}
}

func TestNewFails(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	if _, err := os.Stat("/dev/full"); err == nil {
		if err := os.Symlink("/dev/full", filepath.Join(full, trace.FileName(0))); err != nil {
			t.Fatal(err)
		}
	} else {
		full = ""
	}
	cases := []struct {
		name string
		dir  string
		want error
	}{
		{"directory under a file", filepath.Join(notDir, "profile"), syscall.ENOTDIR},
		{"the directory is a file", notDir, syscall.ENOTDIR},
		{"the header cannot be written", full, syscall.ENOSPC},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.dir == "" {
				t.Skip("no /dev/full")
			}
			rec, err := trace.New(c.dir, trace.Header{Rank: 0, Size: 1})
			if rec != nil || !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "trace: ") {
				t.Fatalf("New = %v, %v; want nil and a trace: error wrapping %v", rec, err, c.want)
			}
			// A recorder that failed to open counts as none.
			if s := trace.Region(context.Background(), "x"); s != nil {
				t.Errorf("Region after a failed New = %v, want nil", s)
			}
		})
	}
}

func TestNilRecorder(t *testing.T) {
	var r *trace.Recorder
	cases := []struct {
		name string
		call func() any
		want any
	}{
		{"Now", func() any { return r.Now() }, int64(0)},
		{"NextSeq", func() any { return r.NextSeq(3) }, uint64(0)},
		{"Intern", func() any { return r.Intern("x") }, uint32(0)},
		{"Site", func() any { return r.Site() }, uint32(0)},
		{"Path", func() any { return r.Path() }, ""},
		{"Comm", func() any { r.Comm(1, []int{0, 1}); return nil }, nil},
		{"SetClock", func() any { r.SetClock(time.Second, time.Millisecond); return nil }, nil},
		{"Record", func() any { r.Record(trace.Event{Kind: trace.CollectiveEvent}, "allreduce", "ring"); return nil }, nil},
		{"Close", func() any { return r.Close() }, nil},
		{"Close again", func() any { return r.Close() }, nil},
		// A context carrying a nil recorder records nothing.
		{"Region", func() any { return trace.Region(trace.WithRecorder(context.Background(), r), "x") }, (*trace.Span)(nil)},
	}
	for _, c := range cases {
		if got := c.call(); got != c.want {
			t.Errorf("%s on a nil *Recorder = %#v, want %#v", c.name, got, c.want)
		}
	}
}

func TestCloseIdempotent(t *testing.T) {
	var clock fakeClock
	clock.set(10)
	rec := newRecorder(t, trace.Header{}, trace.WithClock(clock.now))
	rec.Record(trace.Event{Kind: trace.SendEvent, Start: 1, End: 2, Peer: 0}, "", "")
	clock.set(20)
	if err := rec.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closedBytes := fileBytes(t, rec.Path())
	clock.set(30)
	if err := rec.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	// Everything after Close is dropped.
	ctx := trace.WithRecorder(context.Background(), rec)
	rec.Record(trace.Event{Kind: trace.CollectiveEvent, Start: 3, End: 4}, "allreduce", "ring")
	rec.Comm(4, []int{0})
	rec.SetClock(time.Second, time.Second)
	rec.Intern("late")
	rec.Site()
	trace.Region(ctx, "late").End()
	if err := rec.Close(); err != nil {
		t.Fatalf("third Close: %v", err)
	}
	if got := fileBytes(t, rec.Path()); !bytes.Equal(got, closedBytes) {
		t.Errorf("the file changed after Close: %d bytes, then %d", len(closedBytes), len(got))
	}
	f, err := trace.ReadFile(rec.Path())
	if err != nil || len(f.Events) != 1 || f.Written != 1 || f.End != 20 || len(f.Comms) != 0 || f.RTT != 0 {
		t.Errorf("after Close: %d events, Written %d, End %d, Comms %v, RTT %d, %v; want 1, 1, 20, none, 0, nil",
			len(f.Events), f.Written, f.End, f.Comms, f.RTT, err)
	}
}

func TestNextSeq(t *testing.T) {
	cases := []struct {
		name  string
		comms []uint32
		want  []uint64
	}{
		{"one communicator", []uint32{0, 0, 0}, []uint64{0, 1, 2}},
		{"interleaved", []uint32{0, 5, 0, 5, 5, 7}, []uint64{0, 0, 1, 1, 2, 0}},
		{"largest id", []uint32{math.MaxUint32, 0, math.MaxUint32}, []uint64{0, 0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder(t, trace.Header{})
			var got []uint64
			for _, id := range c.comms {
				got = append(got, rec.NextSeq(id))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("NextSeq over %v = %v, want %v", c.comms, got, c.want)
			}
		})
	}
}

// TestStreaming records more than the recorder buffers: it must have
// written part of the file before Close, and the whole must read back.
func TestStreaming(t *testing.T) {
	var clock fakeClock
	rec := newRecorder(t, trace.Header{}, trace.WithClock(clock.now))
	const n = 30_000
	for i := range n {
		rec.Record(trace.Event{Kind: trace.CollectiveEvent, Start: int64(i) * 10, End: int64(i)*10 + 5, Comm: 1, Bytes: int64(i) * 7, Seq: rec.NextSeq(1)}, "allreduce", "ring")
	}
	st, err := os.Stat(rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < trace.FlushAt {
		t.Errorf("after %d events the file holds %d bytes; want the recorder to have written at least %d", n, st.Size(), trace.FlushAt)
	}
	f := closeAndRead(t, rec)
	if int64(len(fileBytes(t, rec.Path()))) < 4*trace.FlushAt {
		t.Fatalf("the test's trace is too small to need several flushes")
	}
	if len(f.Events) != n {
		t.Fatalf("%d events, want %d", len(f.Events), n)
	}
	for i, e := range f.Events {
		want := view{Kind: trace.CollectiveEvent, Start: int64(i) * 10, End: int64(i)*10 + 5, Comm: 1, Peer: -1, Bytes: int64(i) * 7, Seq: uint64(i), Name: "allreduce", Algo: "ring"}
		if got := viewOf(f, e); got != want {
			t.Fatalf("event %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	if len(f.Strings) != 3 {
		t.Errorf("strings %q, want the empty string, the name and the algorithm", f.Strings)
	}
}

func TestConcurrentRecord(t *testing.T) {
	rec := newRecorder(t, trace.Header{Rank: 1, Size: 8})
	ctx := trace.WithRecorder(context.Background(), rec)
	const workers, each, regionEvery = 8, 500, 10
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			comm := uint32(g + 1)
			rec.Comm(comm, []int{g, 0})
			track := rec.Intern(fmt.Sprintf("worker %d", g))
			for i := range each {
				e := trace.Event{Kind: trace.CollectiveEvent, Track: track, Comm: comm, Bytes: int64(i), Seq: rec.NextSeq(comm), Start: rec.Now(), Site: rec.Site()}
				rec.Record(e, fmt.Sprintf("op %d", g), "ring")
				if i%regionEvery == 0 {
					trace.Region(trace.WithTrack(ctx, fmt.Sprintf("worker %d", g)), "step").End()
				}
			}
		})
	}
	wg.Wait()
	f := closeAndRead(t, rec)

	seqs := map[uint32]uint64{}
	var colls, regions int
	for _, e := range f.Events {
		if e.End < e.Start {
			t.Fatalf("event %+v ends before it starts", e)
		}
		v := viewOf(f, e)
		switch e.Kind {
		case trace.CollectiveEvent:
			colls++
			g := int(e.Comm) - 1
			if e.Seq != seqs[e.Comm] || e.Bytes != int64(e.Seq) || v.Name != fmt.Sprintf("op %d", g) || v.Algo != "ring" || v.Track != fmt.Sprintf("worker %d", g) || !strings.Contains(v.Site, "recorder_test.go:") {
				t.Fatalf("collective %+v: want seq and bytes %d, op %d on worker %d's track", v, seqs[e.Comm], g, g)
			}
			seqs[e.Comm]++
		case trace.RegionEvent:
			regions++
			if v.Name != "step" || !strings.HasPrefix(v.Track, "worker ") {
				t.Fatalf("region %+v", v)
			}
		case trace.MemoryEvent:
		default:
			t.Fatalf("unexpected event %+v", v)
		}
	}
	if colls != workers*each || regions != workers*each/regionEvery || len(f.Comms) != workers {
		t.Errorf("%d collectives, %d regions, %d communicators; want %d, %d, %d", colls, regions, len(f.Comms), workers*each, workers*each/regionEvery, workers)
	}
}

func TestKindString(t *testing.T) {
	cases := []struct {
		k    trace.Kind
		want string
	}{
		{trace.SendEvent, "send"}, {trace.RecvEvent, "recv"}, {trace.WaitEvent, "wait"},
		{trace.CollectiveEvent, "collective"}, {trace.RegionEvent, "region"}, {trace.MemoryEvent, "memory"},
		{0, "kind(0)"}, {trace.MemoryEvent + 1, "kind(7)"}, {255, "kind(255)"},
	}
	for _, c := range cases {
		if got := c.k.String(); got != c.want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(c.k), got, c.want)
		}
	}
	if d := (&trace.Event{Start: 40, End: 100}).Dur(); d != 60 {
		t.Errorf("Dur() = %d, want 60", d)
	}
}

// The bugs below were found writing these tests; each test shows one.

func TestWaitKeepsItsName(t *testing.T) {
	rec := newRecorder(t, trace.Header{})
	rec.Record(trace.Event{Kind: trace.WaitEvent, Start: 1, End: 2, Peer: 1}, "recv", "")
	f := closeAndRead(t, rec)
	if got := f.Str(f.Events[0].Name); got != "recv" {
		t.Errorf("the wait's Name reads back as %q, want \"recv\"", got)
	}
}

func TestUnreadableRecords(t *testing.T) {
	cases := []struct {
		name   string
		h      trace.Header
		record func(*trace.Recorder)
	}{
		{"negative bytes", trace.Header{Size: 1}, func(r *trace.Recorder) {
			r.Record(trace.Event{Kind: trace.SendEvent, Start: 1, End: 2, Bytes: -1}, "", "")
		}},
		{"a string over the decoder's record limit", trace.Header{Size: 1}, func(r *trace.Recorder) {
			r.Record(trace.Event{Kind: trace.RegionEvent, Start: 1, End: 2}, strings.Repeat("x", trace.MaxRecord+1), "")
		}},
		{"an event of no known kind", trace.Header{Size: 1}, func(r *trace.Recorder) {
			r.Record(trace.Event{Kind: 0, Start: 1, End: 2}, "", "")
		}},
		{"a header of size 0", trace.Header{Size: 0}, func(*trace.Recorder) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, err := trace.New(t.TempDir(), c.h)
			if err != nil {
				return // refusing is a fix too
			}
			c.record(rec)
			rec.Record(trace.Event{Kind: trace.RegionEvent, Start: 3, End: 4}, "after", "")
			if err := rec.Close(); err != nil {
				return
			}
			f, err := trace.ReadFile(rec.Path())
			if err != nil {
				t.Errorf("the recorder wrote a file its decoder rejects (after %d events): %v", len(f.Events), err)
			}
		})
	}
}
