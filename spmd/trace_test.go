package spmd_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// tracedWorlds builds n worlds over net/mem, each recording into dir;
// rank skewed's clock runs skew ahead.
func tracedWorlds(t *testing.T, n int, dir string, skewed int, skew time.Duration) []*spmd.World {
	t.Helper()
	recs := make([]*trace.Recorder, n)
	for r := range recs {
		var opts []trace.Option
		if r == skewed {
			start := time.Now()
			opts = append(opts, trace.WithClock(func() time.Duration { return time.Since(start) + skew }))
		}
		rec, err := trace.New(dir, trace.Header{Rank: r, Size: n, Job: "t"}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		recs[r] = rec
	}
	ws, _ := spmdtest.Worlds(t, n, func(r int) []spmd.Option { return []spmd.Option{spmd.WithTrace(recs[r])} })
	return ws
}

// onEach runs f on every world at once.
func onEach(t *testing.T, ws []*spmd.World, f func(ctx context.Context, w *spmd.World) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(context.Background(), w)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
}

// TestTraceClockSkew gives rank 2 a clock 5 s ahead: the offset Init's
// ping-pongs measure puts its barrier exits within a millisecond of the
// others' on rank 0's clock, as they are on the wall clock.
func TestTraceClockSkew(t *testing.T) {
	const n, skew = 4, 5 * time.Second
	dir := t.TempDir()
	ws := tracedWorlds(t, n, dir, 2, skew)
	onEach(t, ws, func(ctx context.Context, w *spmd.World) error { return spmd.SyncClock(ctx, w, w.Trace()) })
	onEach(t, ws, func(ctx context.Context, w *spmd.World) error { return w.Barrier(ctx) })
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ends := make([]int64, n)
	for r := 0; r < n; r++ {
		f, err := trace.ReadFile(dir + "/" + trace.FileName(r))
		if err != nil {
			t.Fatal(err)
		}
		if r != 0 && f.RTT <= 0 {
			t.Errorf("rank %d: no round trip recorded", r)
		}
		var barrier *trace.Event
		for i := range f.Events {
			if e := &f.Events[i]; e.Kind == trace.CollectiveEvent && f.Str(e.Name) == "barrier" {
				barrier = e
			}
		}
		if barrier == nil {
			t.Fatalf("rank %d recorded no barrier", r)
		}
		ends[r] = barrier.End + f.Offset
		if r == 2 && (f.Offset > int64(-skew+50*time.Millisecond) || f.Offset < int64(-skew-50*time.Millisecond)) {
			t.Errorf("rank 2's offset %v, want about %v", time.Duration(f.Offset), -skew)
		}
	}
	for r := 1; r < n; r++ {
		// The barrier's exits come within a round or two of each other:
		// generous for a loaded 2-core machine, far below the 5 s skew.
		if d := time.Duration(ends[r] - ends[0]); d > 50*time.Millisecond || d < -50*time.Millisecond {
			t.Errorf("rank %d left the barrier %v from rank 0, on rank 0's clock", r, d)
		}
	}
}

// TestTracePointToPoint: a blocking send and receive are recorded with
// their peer, tag, bytes and call site; an Irecv and its Wait as a
// non-blocking receive and a wait; collective-context traffic not at all.
func TestTracePointToPoint(t *testing.T) {
	dir := t.TempDir()
	ws := tracedWorlds(t, 2, dir, -1, 0)
	onEach(t, ws, func(ctx context.Context, w *spmd.World) error {
		buf := make([]byte, 100)
		if w.Rank() == 0 {
			if err := w.Send(ctx, 1, 3, buf); err != nil {
				return err
			}
			return w.Send(ctx, 1, 4, buf[:10])
		}
		if _, err := w.Recv(ctx, 0, 3, buf); err != nil {
			return err
		}
		r := w.Irecv(0, 4, buf)
		_, err := r.Wait(ctx)
		return err
	})
	for _, w := range ws {
		w.Close()
	}
	f0, err := trace.ReadFile(dir + "/" + trace.FileName(0))
	if err != nil {
		t.Fatal(err)
	}
	f1, err := trace.ReadFile(dir + "/" + trace.FileName(1))
	if err != nil {
		t.Fatal(err)
	}
	count := func(f *trace.File, k trace.Kind) (n int, last trace.Event) {
		for _, e := range f.Events {
			if e.Kind == k {
				n++
				last = e
			}
		}
		return
	}
	if n, e := count(f0, trace.SendEvent); n != 2 || e.Peer != 1 || e.Tag != 4 || e.Bytes != 10 || e.Flags&trace.NonBlocking != 0 {
		t.Errorf("rank 0: %d sends, last %+v", n, e)
	} else if site := f0.Str(e.Site); site == "" || !strings.Contains(site, "trace_test.go:") {
		t.Errorf("send's call site %q, want this file", site)
	}
	if n, e := count(f1, trace.RecvEvent); n != 2 || e.Peer != 0 || e.Tag != 4 || e.Bytes != 10 || e.Flags&trace.NonBlocking == 0 {
		t.Errorf("rank 1: %d receives, last %+v", n, e)
	}
	if n, _ := count(f1, trace.WaitEvent); n > 1 {
		t.Errorf("rank 1: %d waits, want at most 1", n)
	}
	if n, _ := count(f0, trace.CollectiveEvent); n != 0 {
		t.Errorf("rank 0 recorded %d collectives, want none", n)
	}
	if len(f0.Comms[0]) != 2 {
		t.Errorf("world communicator's members %v", f0.Comms[0])
	}
}
