package trace_test

import (
	"context"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// BenchmarkRecordCollective is the cost a traced collective adds: one
// Record of its event, with the operation's and algorithm's names.
func BenchmarkRecordCollective(b *testing.B) {
	rec := newRecorder(b, trace.Header{})
	e := trace.Event{Kind: trace.CollectiveEvent, Comm: 1, Peer: -1, Bytes: 1 << 20, Predicted: 12345}
	b.ReportAllocs()
	for b.Loop() {
		e.Seq = rec.NextSeq(1)
		e.Start = rec.Now()
		rec.Record(e, "allreduce", "ring")
	}
}

// BenchmarkSite is Site from a call site already seen: the frame walk and
// a map lookup.
func BenchmarkSite(b *testing.B) {
	rec := newRecorder(b, trace.Header{})
	b.ReportAllocs()
	for b.Loop() {
		rec.Site()
	}
}

// BenchmarkRegion is a region's start and end, with its heap samples.
func BenchmarkRegion(b *testing.B) {
	rec := newRecorder(b, trace.Header{})
	ctx := trace.WithRecorder(context.Background(), rec)
	b.ReportAllocs()
	for b.Loop() {
		trace.Region(ctx, "forward").End()
	}
}

// BenchmarkNilRecorder is what tracing costs with profiling off: the calls
// a traced operation makes on a nil recorder, and a region.
func BenchmarkNilRecorder(b *testing.B) {
	var rec *trace.Recorder
	ctx := context.Background()
	e := trace.Event{Kind: trace.CollectiveEvent, Comm: 1, Peer: -1, Bytes: 1 << 20}
	b.ReportAllocs()
	for b.Loop() {
		e.Seq = rec.NextSeq(1)
		e.Site = rec.Site()
		e.Start = rec.Now()
		rec.Record(e, "allreduce", "ring")
		trace.Region(ctx, "forward").End()
	}
}
