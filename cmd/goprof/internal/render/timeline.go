package render

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// Timeline writes j as Chrome trace event JSON, the format Perfetto
// (ui.perfetto.dev) and chrome://tracing open:
//
//	{"traceEvents":[...],"displayTimeUnit":"ns","otherData":{...}}
//
// Each rank is a process named "rank N (host)", sorted by rank; its pid
// is the rank plus 1, because Perfetto takes pid 0 for the kernel's idle
// process. Each track is a thread: tid 1 is the main track, the others
// are numbered from 2 in the order they first appear (a tid of 0 would be
// replaced by the pid). Every call and region is a complete event ("X")
// with ts and dur in microseconds, to the nanosecond; the heap is a
// counter ("C") named heap. An arrow (a flow, "s" to "f", category msg)
// goes from each send, at its start, to its matched receive, at its end.
//
// Slices on one thread must nest, and a non-blocking send or receive,
// which lasts from its post to its completion, overlaps what the rank did
// meanwhile: such calls go on a thread of their own beside their track's
// ("main: non-blocking"), and any call that still overlaps another
// without nesting goes on an "(overlapping)" thread beside that.
//
// Timeline streams: besides the job it holds two integers per event.
func Timeline(w io.Writer, j *job.Job) error {
	tw := &traceWriter{bw: bufio.NewWriterSize(w, 256<<10)}
	tw.enc = json.NewEncoder(tw.bw)
	tw.enc.SetEscapeHTML(false)
	tw.raw("{\"traceEvents\":[\n")
	flows := flowIDs(j)
	for _, r := range j.Present() {
		tw.rank(j, r, flows[r.Rank])
	}
	tw.raw("],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":")
	if tw.err == nil {
		tw.err = tw.enc.Encode(otherData(j))
	}
	tw.raw("}\n")
	if tw.err == nil {
		tw.err = tw.bw.Flush()
	}
	if tw.err != nil {
		return fmt.Errorf("writing the timeline: %w", tw.err)
	}
	return nil
}

// traceWriter writes trace events, keeping the first error.
type traceWriter struct {
	bw  *bufio.Writer
	enc *json.Encoder
	n   int // events written
	err error
}

func (tw *traceWriter) raw(s string) {
	if tw.err == nil {
		_, tw.err = tw.bw.WriteString(s)
	}
}

// event writes one element of traceEvents.
func (tw *traceWriter) event(v any) {
	if tw.err != nil {
		return
	}
	if tw.n > 0 {
		tw.raw(",")
	}
	tw.n++
	if tw.err == nil {
		tw.err = tw.enc.Encode(v)
	}
}

// us converts ns to the trace format's microseconds, keeping the ns.
func us(ns int64) float64 { return float64(ns) / 1000 }

// pidOf is the trace process of rank.
func pidOf(rank int) int { return rank + 1 }

// threadGroup is the threads one track's slices go on: the first, and
// those for slices that overlap the others' without nesting.
type threadGroup struct {
	name    string
	sort    int // the first thread's sort index
	threads []slot
}

// slot is one thread and the ends of its open slices, innermost last.
type slot struct {
	tid  int
	ends []int64
}

// groupKey names a threadGroup: a track, and whether it holds the
// track's non-blocking sends and receives.
type groupKey struct {
	track       uint32
	nonBlocking bool
}

// rank writes r's process, threads, slices, counters and flows.
func (tw *traceWriter) rank(j *job.Job, r *job.Rank, flows []uint32) {
	pid := pidOf(r.Rank)
	label := fmt.Sprintf("rank %d", r.Rank)
	if r.Host != "" {
		label += " (" + r.Host + ")"
	}
	tw.event(&metaEvent{Name: "process_name", Ph: "M", Pid: pid, Tid: 1, Args: nameArg{label}})
	tw.event(&metaEvent{Name: "process_sort_index", Ph: "M", Pid: pid, Tid: 1, Args: sortArg{r.Rank}})
	ts := tracks(r)
	tidOf := map[uint32]int{}
	groups := map[groupKey]*threadGroup{}
	for i, t := range ts {
		tid := i + 1
		tidOf[t] = tid
		g := &threadGroup{name: trackName(j, t), sort: 100 * i, threads: []slot{{tid: tid}}}
		groups[groupKey{t, false}] = g
		tw.thread(pid, tid, g.name, g.sort)
	}
	next := len(ts) + 1 // the next free tid
	place := func(e *trace.Event) int {
		k := groupKey{e.Track, e.Flags&trace.NonBlocking != 0 && (e.Kind == trace.SendEvent || e.Kind == trace.RecvEvent)}
		g := groups[k]
		if g == nil {
			base := groups[groupKey{e.Track, false}]
			g = &threadGroup{name: base.name + ": non-blocking", sort: base.sort + 50}
			groups[k] = g
		}
		for i := range g.threads {
			s := &g.threads[i]
			for len(s.ends) > 0 && s.ends[len(s.ends)-1] <= e.Start {
				s.ends = s.ends[:len(s.ends)-1]
			}
			if len(s.ends) == 0 || s.ends[len(s.ends)-1] >= e.End {
				s.ends = append(s.ends, e.End)
				return s.tid
			}
		}
		name := g.name
		if n := len(g.threads); n > 0 {
			name = fmt.Sprintf("%s (overlapping %d)", g.name, n)
		}
		s := slot{tid: next, ends: []int64{e.End}}
		next++
		tw.thread(pid, s.tid, name, g.sort+len(g.threads))
		g.threads = append(g.threads, s)
		return s.tid
	}
	for _, i := range order(r.Events) {
		e := &r.Events[i]
		if e.Kind == trace.MemoryEvent {
			tw.event(&counterEvent{Name: "heap", Ph: "C", Ts: us(e.Start), Pid: pid, Tid: tidOf[e.Track], Args: heapValue{e.Bytes}})
			continue
		}
		tid := place(e)
		tw.event(sliceOf(j, e, pid, tid))
		if flows == nil || flows[i] == 0 {
			continue
		}
		switch e.Kind {
		case trace.SendEvent:
			tw.event(&flowEvent{Name: "message", Cat: "msg", Ph: "s", ID: flows[i], Ts: us(e.Start), Pid: pid, Tid: tid})
		case trace.RecvEvent:
			tw.event(&flowEvent{Name: "message", Cat: "msg", Ph: "f", BP: "e", ID: flows[i], Ts: us(e.End), Pid: pid, Tid: tid})
		}
	}
}

// thread writes a thread's name and sort index.
func (tw *traceWriter) thread(pid, tid int, name string, sort int) {
	tw.event(&metaEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: tid, Args: nameArg{name}})
	tw.event(&metaEvent{Name: "thread_sort_index", Ph: "M", Pid: pid, Tid: tid, Args: sortArg{sort}})
}

// sliceOf returns e as a complete event.
func sliceOf(j *job.Job, e *trace.Event, pid, tid int) *sliceEvent {
	s := &sliceEvent{Cat: e.Kind.String(), Ph: "X", Ts: us(e.Start), Dur: us(e.Dur()), Pid: pid, Tid: tid}
	failed := e.Flags&trace.Failed != 0
	switch e.Kind {
	case trace.RegionEvent:
		s.Name = j.Str(e.Name)
		if s.Name == "" {
			s.Name = "region"
		}
	case trace.CollectiveEvent:
		s.Name = opName(j, e)
		a := collArgs{Bytes: e.Bytes, Comm: e.Comm, Seq: e.Seq, Algo: j.Str(e.Algo), Site: j.Str(e.Site), Failed: failed}
		if e.Predicted > 0 {
			a.PredictedUS = us(e.Predicted)
		}
		s.Args = a
	default: // send, recv, wait
		s.Name = opName(j, e)
		a := p2pArgs{Bytes: e.Bytes, Peer: e.Peer, Tag: e.Tag, Comm: e.Comm, Site: j.Str(e.Site), Failed: failed}
		if e.Kind == trace.WaitEvent {
			a.For = j.Str(e.Name)
		}
		s.Args = a
	}
	return s
}

// flowIDs numbers the matched messages from 1 and returns, per rank and
// event index, the number of the message a send or receive is part of
// (0: none); nil for a rank without matched messages.
func flowIDs(j *job.Job) [][]uint32 {
	ids := make([][]uint32, len(j.Ranks))
	mark := func(ref job.Ref, id uint32) {
		if ids[ref.Rank] == nil {
			ids[ref.Rank] = make([]uint32, len(j.Ranks[ref.Rank].Events))
		}
		ids[ref.Rank][ref.Index] = id
	}
	for n, m := range j.Messages() {
		mark(m.Send, uint32(n+1))
		mark(m.Recv, uint32(n+1))
	}
	return ids
}

// traceInfo is the trace's otherData: what the job was.
type traceInfo struct {
	Generator string   `json:"generator"`
	Dir       string   `json:"dir"`
	ID        string   `json:"job,omitempty"`
	Program   string   `json:"program,omitempty"`
	Size      int      `json:"size"`
	Ranks     string   `json:"ranks"` // those in the trace, as 0,2-4
	Missing   []int    `json:"missing,omitempty"`
	Problems  []string `json:"problems,omitempty"`
	Duration  int64    `json:"duration_ns"`
	Events    int      `json:"events"`
}

func otherData(j *job.Job) traceInfo {
	info := traceInfo{Generator: "goprof", Dir: j.Dir, ID: j.ID, Program: j.Program, Size: j.Size, Missing: j.Missing, Problems: j.Problems, Duration: j.Duration}
	var present []int
	for _, r := range j.Present() {
		present = append(present, r.Rank)
		info.Events += len(r.Events)
	}
	info.Ranks = job.Ranges(present)
	return info
}
