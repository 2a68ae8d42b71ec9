package trace_test

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// fakeClock is a clock the test sets: a recorder made WithClock(c.now)
// stamps its events with exactly the times the test chose.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Duration { return time.Duration(c.t.Load()) }
func (c *fakeClock) set(t int64)        { c.t.Store(t) }

// newRecorder opens a recorder in a fresh directory; it is closed when the
// test ends, so that no test leaves one open for the next (Region looks at
// how many are).
func newRecorder(t testing.TB, h trace.Header, opts ...trace.Option) *trace.Recorder {
	t.Helper()
	if h.Size == 0 {
		h.Size = h.Rank + 1
	}
	rec, err := trace.New(t.TempDir(), h, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { rec.Close() })
	return rec
}

// closeAndRead closes rec and decodes its file, which must be whole.
func closeAndRead(t testing.TB, rec *trace.Recorder) *trace.File {
	t.Helper()
	if err := rec.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	f, err := trace.ReadFile(rec.Path())
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if !f.Done || f.Written != uint64(len(f.Events)) {
		t.Fatalf("ReadFile: Done %v, Written %d, %d events", f.Done, f.Written, len(f.Events))
	}
	return f
}

// fileBytes returns the contents of path.
func fileBytes(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// view is an event with its strings resolved, for comparisons.
type view struct {
	Kind                    trace.Kind
	Flags                   trace.Flags
	Start, End              int64
	Bytes                   int64
	Seq                     uint64
	Predicted               int64
	Comm                    uint32
	Peer, Tag               int32
	Name, Algo, Site, Track string
}

func viewOf(f *trace.File, e trace.Event) view {
	return view{
		Kind: e.Kind, Flags: e.Flags, Start: e.Start, End: e.End, Bytes: e.Bytes, Seq: e.Seq, Predicted: e.Predicted,
		Comm: e.Comm, Peer: e.Peer, Tag: e.Tag,
		Name: f.Str(e.Name), Algo: f.Str(e.Algo), Site: f.Str(e.Site), Track: f.Str(e.Track),
	}
}

// eventsOf returns f's events of kind k, resolved, in file order.
func eventsOf(f *trace.File, k trace.Kind) []view {
	var vs []view
	for _, e := range f.Events {
		if e.Kind == k {
			vs = append(vs, viewOf(f, e))
		}
	}
	return vs
}
