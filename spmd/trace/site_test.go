package trace_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// siteName is the string Site should give for the call at pc's function,
// file:line: "pkg.Func dir/file.go:line".
func siteName(pc uintptr, file string, line int) string {
	fn := runtime.FuncForPC(pc).Name()
	fn = fn[strings.LastIndexByte(fn, '/')+1:]
	return fmt.Sprintf("%s %s/%s:%d", fn, filepath.Base(filepath.Dir(file)), filepath.Base(file), line)
}

// siteHere calls rec.Site and returns its id and the site it should name.
func siteHere(rec *trace.Recorder) (uint32, string) {
	pc, file, line, _ := runtime.Caller(0)
	id := rec.Site() // the line after runtime.Caller's
	return id, siteName(pc, file, line+1)
}

type siteMaker struct{ rec *trace.Recorder }

func (m siteMaker) site() (uint32, string) {
	pc, file, line, _ := runtime.Caller(0)
	id := m.rec.Site()
	return id, siteName(pc, file, line+1)
}

type siter interface{ site() (uint32, string) }

// deep calls siteHere n frames down.
func deep(rec *trace.Recorder, n int) (uint32, string) {
	if n == 0 {
		return siteHere(rec)
	}
	id, want := deep(rec, n-1)
	return id, want
}

func TestSite(t *testing.T) {
	cases := []struct {
		name string
		call func(rec *trace.Recorder) (uint32, string)
	}{
		{"helper", siteHere},
		{"in the test", func(rec *trace.Recorder) (uint32, string) {
			pc, file, line, _ := runtime.Caller(0)
			id := rec.Site()
			return id, siteName(pc, file, line+1)
		}},
		{"method through an interface", func(rec *trace.Recorder) (uint32, string) {
			var s siter = siteMaker{rec}
			return s.site()
		}},
		{"goroutine", func(rec *trace.Recorder) (uint32, string) {
			type result struct {
				id   uint32
				want string
			}
			ch := make(chan result)
			go func() {
				id, want := siteHere(rec)
				ch <- result{id, want}
			}()
			r := <-ch
			return r.id, r.want
		}},
		{"deeper than the frames Site walks", func(rec *trace.Recorder) (uint32, string) {
			return deep(rec, 3*trace.SiteDepth)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder(t, trace.Header{})
			id, want := c.call(rec)
			if id == 0 {
				t.Fatal("Site() = 0")
			}
			rec.Record(trace.Event{Kind: trace.SendEvent, Start: 1, End: 2, Peer: 0, Site: id}, "", "")
			f := closeAndRead(t, rec)
			got := f.Str(id)
			if got != want || !strings.Contains(got, "trace_test.") || !strings.Contains(got, "_test.go:") {
				t.Errorf("Site() names %q, want %q", got, want)
			}
			if e := f.Events[0]; f.Str(e.Site) != want {
				t.Errorf("the event's Site reads back as %q, want %q", f.Str(e.Site), want)
			}
		})
	}
}

func TestSiteIDs(t *testing.T) {
	rec := newRecorder(t, trace.Header{})
	var loop []uint32
	for range 100 {
		loop = append(loop, rec.Site())
	}
	a := rec.Site()
	b := rec.Site()
	viaA, _ := siteHere(rec)
	viaB := func() uint32 { id, _ := siteHere(rec); return id }()
	for i, id := range loop {
		if id != loop[0] {
			t.Fatalf("call %d from one line: id %d, the first gave %d", i, id, loop[0])
		}
	}
	if a == b || a == loop[0] || b == loop[0] {
		t.Errorf("three lines gave ids %d, %d and %d, want three", loop[0], a, b)
	}
	if viaA != viaB {
		t.Errorf("one line reached from two callers gave ids %d and %d, want one", viaA, viaB)
	}
	f := closeAndRead(t, rec)
	for _, id := range []uint32{loop[0], a, b, viaA} {
		if n := strings.Count(strings.Join(f.Strings, "\n")+"\n", f.Str(id)+"\n"); n != 1 {
			t.Errorf("site %q is in the file's strings %d times, want once", f.Str(id), n)
		}
	}
}

// frames resolves pcs (return addresses) to their functions and lines.
func frames(pcs []uintptr) []runtime.Frame {
	var fs []runtime.Frame
	it := runtime.CallersFrames(pcs)
	for {
		f, more := it.Next()
		if f.Function != "" {
			fs = append(fs, f)
		}
		if !more {
			return fs
		}
	}
}

// walk returns the frame-pointer walk's and the runtime's stacks, both
// from the caller of walk's caller (callers* below).
func walk(pcs []uintptr) (fp, rt []runtime.Frame) {
	n := trace.Callers(pcs)
	var rpcs [64]uintptr
	m := runtime.Callers(1, rpcs[:])
	return frames(pcs[:n]), frames(rpcs[:m])
}

func callersA(pcs []uintptr) ([]runtime.Frame, []runtime.Frame) { return callersB(pcs) }
func callersB(pcs []uintptr) ([]runtime.Frame, []runtime.Frame) { return callersC(pcs) }
func callersC(pcs []uintptr) ([]runtime.Frame, []runtime.Frame) {
	fp, rt := walk(pcs)
	return fp, rt
}

func names(fs []runtime.Frame) []string {
	var s []string
	for _, f := range fs {
		s = append(s, f.Function)
	}
	return s
}

// TestCallers compares the frame-pointer walk behind Site with the
// runtime's.
func TestCallers(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("callers is runtime.Callers off amd64")
	}
	const prefix = "github.com/gorun-hpc/gorun/spmd/trace_test."
	want := []string{prefix + "walk", prefix + "callersC", prefix + "callersB", prefix + "callersA"}
	cases := []struct {
		name  string
		depth int  // the pcs Callers is given
		whole bool // the walk reaches the stack's end: the stacks must agree throughout
		run   func(func() ([]runtime.Frame, []runtime.Frame)) ([]runtime.Frame, []runtime.Frame)
	}{
		{"in the test", 64, false, func(f func() ([]runtime.Frame, []runtime.Frame)) ([]runtime.Frame, []runtime.Frame) { return f() }},
		{"to a goroutine's end", 64, true, func(f func() ([]runtime.Frame, []runtime.Frame)) ([]runtime.Frame, []runtime.Frame) {
			var fp, rt []runtime.Frame
			done := make(chan struct{})
			go func() {
				defer close(done)
				fp, rt = f()
			}()
			<-done
			return fp, rt
		}},
		{"as many frames as Site walks", trace.SiteDepth, false, func(f func() ([]runtime.Frame, []runtime.Frame)) ([]runtime.Frame, []runtime.Frame) { return f() }},
		{"two frames", 2, false, func(f func() ([]runtime.Frame, []runtime.Frame)) ([]runtime.Frame, []runtime.Frame) { return f() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pcs := make([]uintptr, c.depth+1)
			pcs[c.depth] = 12345 // a guard Callers must not touch
			fp, rt := c.run(func() ([]runtime.Frame, []runtime.Frame) { return callersA(pcs[:c.depth]) })
			if pcs[c.depth] != 12345 {
				t.Fatalf("Callers wrote past the slice's end")
			}
			k := min(len(want), c.depth)
			if len(fp) < k || len(rt) < k {
				t.Fatalf("stacks of %d and %d frames:\n fp %v\n rt %v", len(fp), len(rt), names(fp), names(rt))
			}
			if !equal(names(fp[:k]), want[:k]) || !equal(names(rt[:k]), want[:k]) {
				t.Errorf("first frames\n fp %v\n rt %v\nwant %v", names(fp[:k]), names(rt[:k]), want[:k])
			}
			// The first frame's lines differ (two calls in walk); the
			// callers' lines must agree.
			for i := 1; i < k; i++ {
				if fp[i].File != rt[i].File || fp[i].Line != rt[i].Line {
					t.Errorf("frame %d: %s:%d by frame pointers, %s:%d by the runtime", i, fp[i].File, fp[i].Line, rt[i].File, rt[i].Line)
				}
			}
			if c.whole && !equal(names(fp), names(rt)) {
				t.Errorf("whole stacks differ:\n fp %v\n rt %v", names(fp), names(rt))
			}
		})
	}
	if n := trace.Callers(nil); n != 0 {
		t.Errorf("Callers(nil) = %d", n)
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// TestSiteInternalFrames calls Site through frames of package trace, which
// a site skips as it skips spmd's and prims'.
func TestSiteInternalFrames(t *testing.T) {
	cases := []struct {
		name  string
		depth int
		line  bool // the site is the test's line, not trace's last frame walked
	}{
		{"one frame", 0, true},
		{"a few frames", 5, true},
		{"all the frames walked", 2 * trace.SiteDepth, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder(t, trace.Header{})
			pc, file, line, _ := runtime.Caller(0)
			id := trace.SiteVia(rec, c.depth)
			want := siteName(pc, file, line+1)
			got := closeAndRead(t, rec).Str(id)
			if c.line && got != want {
				t.Errorf("Site through %d frames of trace names %q, want %q", c.depth+1, got, want)
			}
			// With no frame outside, the site is the last one walked.
			if !c.line && !strings.HasPrefix(got, "trace.SiteVia trace/export_test.go:") {
				t.Errorf("Site through %d frames of trace names %q, want trace's last frame walked", c.depth+1, got)
			}
		})
	}
}

// TestSiteManyLines calls Site from more lines than the recorder keeps
// recent sites of, twice over: each line must keep its own id.
func TestSiteManyLines(t *testing.T) {
	rec := newRecorder(t, trace.Header{})
	var passes [2][]uint32
	var first int
	for i := range passes {
		_, _, line, _ := runtime.Caller(0)
		first = line + 3 // the line of the first rec.Site()
		passes[i] = []uint32{
			rec.Site(), rec.Site(), // two calls on one line share a site
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
			rec.Site(),
		}
	}
	f := closeAndRead(t, rec)
	if !slices.Equal(passes[0], passes[1]) {
		t.Errorf("the same lines gave ids\n%v\nthen\n%v", passes[0], passes[1])
	}
	if passes[1][0] != passes[1][1] {
		t.Errorf("two calls on one line gave ids %d and %d", passes[1][0], passes[1][1])
	}
	seen := map[uint32]int{}
	for i, id := range passes[1] {
		line := first + max(i-1, 0)
		if got := f.Str(id); !strings.HasSuffix(got, fmt.Sprintf("site_test.go:%d", line)) {
			t.Errorf("call %d, on line %d: site %q", i, line, got)
		}
		if j, ok := seen[id]; ok && i != 1 {
			t.Errorf("calls %d and %d, on two lines, share id %d", j, i, id)
		}
		seen[id] = i
	}
	if len(passes[0]) <= 32 {
		t.Fatalf("only %d lines", len(passes[0]))
	}
}
