package render

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// writeRank writes rank's trace file in dir with the real recorder: a
// job of size ranks on communicator 0, rank 0's clock, and the events
// fill records.
func writeRank(t testing.TB, dir string, rank, size int, fill func(rec *trace.Recorder)) {
	t.Helper()
	rec, err := trace.New(dir, trace.Header{Rank: rank, Size: size, Job: "j1", Host: fmt.Sprintf("h%d", rank/2)})
	if err != nil {
		t.Fatalf("trace.New: %v", err)
	}
	members := make([]int, size)
	for i := range members {
		members[i] = i
	}
	rec.Comm(0, members)
	if rank == 0 {
		rec.SetClock(0, 0)
	} else {
		rec.SetClock(0, 1000) // a round trip: the clock counts as aligned
	}
	fill(rec)
	if err := rec.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// The small fixture's times, in ns on the recorders' clocks; the job's
// clock starts at origin, the first event.
const (
	origin         = 1000
	allreduceEnd   = 60000
	lateSendRank   = 2
	lateSendStart  = 71000
	firstRecvStart = 62000
)

// allreduceStart is when rank enters the first allreduce: rank 3 last.
func allreduceStart(rank int) int64 { return 30007 + int64(rank)*5000 }

// fillSmall records one training step of a ring job: regions step,
// forward and backward; an allreduce the ranks enter one after another;
// a ring of sends (rank 2's late, so that rank 3 waits for it); a
// non-blocking allreduce on an executor track; a barrier; the heap; and
// on ranks 0 and 1 an isend and an irecv with its wait, which overlap
// the backward region without nesting in it.
func fillSmall(rank, size int) func(rec *trace.Recorder) {
	return func(rec *trace.Recorder) {
		r := int64(rank)
		region := func(name string, s, e int64) {
			rec.Record(trace.Event{Kind: trace.RegionEvent, Start: s, End: e, Peer: -1}, name, "")
		}
		coll := func(op string, seq uint64, s, e, bytes int64, flags trace.Flags, track string) {
			ev := trace.Event{Kind: trace.CollectiveEvent, Start: s, End: e, Comm: 0, Peer: -1, Seq: seq, Bytes: bytes, Flags: flags, Predicted: 10000}
			if track != "" {
				ev.Track = rec.Intern(track)
			}
			rec.Record(ev, op, "ring")
		}
		p2p := func(k trace.Kind, peer int, tag int32, s, e, bytes int64, flags trace.Flags) {
			rec.Record(trace.Event{Kind: k, Start: s, End: e, Comm: 0, Peer: int32(peer), Tag: tag, Bytes: bytes, Flags: flags}, "", "")
		}
		rec.Record(trace.Event{Kind: trace.MemoryEvent, Start: 1500, End: 1500, Peer: -1, Bytes: 1 << 20}, "", "")
		region("forward", 2000, allreduceStart(rank))
		coll("allreduce", 0, allreduceStart(rank), allreduceEnd, 4096, 0, "")
		send := int64(61000)
		if rank == lateSendRank {
			send = lateSendStart
		}
		p2p(trace.SendEvent, (rank+1)%size, 7, send, send+1000, 1024, 0)
		p2p(trace.RecvEvent, (rank+size-1)%size, 7, send+1000, 75000+r*100, 1024, 0)
		coll("allreduce", 1, 76000, 90000, 8192, trace.NonBlocking, "comm 0 async")
		switch rank {
		case 0:
			p2p(trace.SendEvent, 1, 9, 80000, 95500, 512, trace.NonBlocking)
		case 1:
			p2p(trace.RecvEvent, 0, 9, 80000, 96000, 512, trace.NonBlocking)
			rec.Record(trace.Event{Kind: trace.WaitEvent, Start: 95000, End: 96000, Comm: 0, Peer: 0, Tag: 9, Bytes: 512}, "recv", "")
		}
		region("backward", 76000, 95000)
		coll("barrier", 2, 96000+r*500, 99000, 0, 0, "")
		rec.Record(trace.Event{Kind: trace.MemoryEvent, Start: 90000, End: 90000, Peer: -1, Bytes: 2 << 20}, "", "")
		region("step", 1000, 100000)
	}
}

// smallJob writes the small fixture for size ranks, leaving out the
// ranks in absent, and loads it.
func smallJob(t testing.TB, size int, absent ...int) *job.Job {
	t.Helper()
	dir := t.TempDir()
	for rank := range size {
		skip := false
		for _, a := range absent {
			skip = skip || a == rank
		}
		if !skip {
			writeRank(t, dir, rank, size, fillSmall(rank, size))
		}
	}
	j, err := job.Load(dir)
	if err != nil {
		t.Fatalf("job.Load: %v", err)
	}
	return j
}

// bigJob writes and loads a job of 4 ranks and about a million events:
// 25,000 steps of 10 events each per rank, 40 µs apart.
func bigJob(t testing.TB) *job.Job {
	t.Helper()
	const size, steps, period = 4, 25000, 40000
	dir := t.TempDir()
	for rank := range size {
		writeRank(t, dir, rank, size, func(rec *trace.Recorder) {
			region := func(name string, s, e int64) {
				rec.Record(trace.Event{Kind: trace.RegionEvent, Start: s, End: e, Peer: -1}, name, "")
			}
			for i := range int64(steps) {
				t0 := 1000 + i*period
				jitter := (i*7 + int64(rank)*13) % 900
				rec.Record(trace.Event{Kind: trace.MemoryEvent, Start: t0 + 1, End: t0 + 1, Peer: -1, Bytes: 1<<20 + i}, "", "")
				region("forward", t0+10, t0+15000+jitter)
				rec.Record(trace.Event{Kind: trace.CollectiveEvent, Start: t0 + 15000 + jitter, End: t0 + 20000, Peer: -1, Seq: uint64(2 * i), Bytes: 1 << 16}, "allreduce", "ring")
				region("backward", t0+20000, t0+35000)
				rec.Record(trace.Event{Kind: trace.SendEvent, Start: t0 + 35000, End: t0 + 36000, Peer: int32((rank + 1) % size), Tag: 1, Bytes: 4096}, "", "")
				rec.Record(trace.Event{Kind: trace.RecvEvent, Start: t0 + 36000, End: t0 + 38000, Peer: int32((rank + size - 1) % size), Tag: 1, Bytes: 4096}, "", "")
				region("optimizer", t0+38000, t0+39500)
				rec.Record(trace.Event{Kind: trace.CollectiveEvent, Start: t0 + 39500, End: t0 + 39900, Peer: -1, Seq: uint64(2*i + 1), Bytes: 64}, "broadcast", "tree")
				region("step", t0, t0+39950)
				rec.Record(trace.Event{Kind: trace.MemoryEvent, Start: t0 + 39960, End: t0 + 39960, Peer: -1, Bytes: 2<<20 + i}, "", "")
			}
		})
	}
	j, err := job.Load(dir)
	if err != nil {
		t.Fatalf("job.Load: %v", err)
	}
	return j
}

// analyze returns j's report.
func analyze(j *job.Job) *report.Report { return report.Analyze(j) }

// writeFile writes b to name in a fresh directory and returns its path.
func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
