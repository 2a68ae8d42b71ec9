package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// traceJSON is what Timeline writes, decoded.
type traceJSON struct {
	TraceEvents     []traceEventJSON `json:"traceEvents"`
	DisplayTimeUnit string           `json:"displayTimeUnit"`
	OtherData       map[string]any   `json:"otherData"`
}

type traceEventJSON struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Ts   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	ID   *uint64        `json:"id"`
	BP   string         `json:"bp"`
	Args map[string]any `json:"args"`
}

func decodeTimeline(t *testing.T, b []byte) traceJSON {
	t.Helper()
	var tj traceJSON
	if err := json.Unmarshal(b, &tj); err != nil {
		t.Fatalf("the timeline is not JSON: %v\n%.2000s", err, b)
	}
	return tj
}

func TestTimeline(t *testing.T) {
	j := smallJob(t, 4)
	var buf bytes.Buffer
	if err := Timeline(&buf, j); err != nil {
		t.Fatal(err)
	}
	tj := decodeTimeline(t, buf.Bytes())
	if tj.DisplayTimeUnit != "ns" {
		t.Errorf("displayTimeUnit %q, want ns", tj.DisplayTimeUnit)
	}
	if tj.OtherData["job"] != "j1" || tj.OtherData["size"] != 4.0 {
		t.Errorf("otherData %v: want job j1, size 4", tj.OtherData)
	}

	procs := map[int]string{}
	threads := map[[2]int]string{}
	var slices, counters []traceEventJSON
	flows := map[uint64][]traceEventJSON{}
	for _, e := range tj.TraceEvents {
		switch e.Ph {
		case "M":
			switch e.Name {
			case "process_name":
				if _, dup := procs[e.Pid]; dup {
					t.Errorf("pid %d named twice", e.Pid)
				}
				procs[e.Pid] = e.Args["name"].(string)
			case "thread_name":
				threads[[2]int{e.Pid, e.Tid}] = e.Args["name"].(string)
			}
		case "X":
			if e.Ts == nil || e.Dur == nil {
				t.Fatalf("X event without ts or dur: %+v", e)
			}
			slices = append(slices, e)
		case "C":
			counters = append(counters, e)
		case "s", "f":
			if e.ID == nil || e.Ts == nil {
				t.Fatalf("flow event without id or ts: %+v", e)
			}
			flows[*e.ID] = append(flows[*e.ID], e)
		default:
			t.Errorf("unexpected phase %q: %+v", e.Ph, e)
		}
	}

	if len(procs) != 4 {
		t.Errorf("%d processes, want one per rank: %v", len(procs), procs)
	}
	for rank := range 4 {
		want := fmt.Sprintf("rank %d (h%d)", rank, rank/2)
		if procs[pidOf(rank)] != want {
			t.Errorf("process %d is %q, want %q", pidOf(rank), procs[pidOf(rank)], want)
		}
		if threads[[2]int{pidOf(rank), 1}] != "main" {
			t.Errorf("rank %d: thread 1 is %q, want main", rank, threads[[2]int{pidOf(rank), 1}])
		}
		if threads[[2]int{pidOf(rank), 2}] != "comm 0 async" {
			t.Errorf("rank %d: thread 2 is %q, want comm 0 async", rank, threads[[2]int{pidOf(rank), 2}])
		}
	}

	events, memory := 0, 0
	for _, r := range j.Present() {
		for _, e := range r.Events {
			if e.Kind == trace.MemoryEvent {
				memory++
			} else {
				events++
			}
		}
	}
	if len(slices) != events {
		t.Errorf("%d X events, want %d", len(slices), events)
	}
	if len(counters) != memory {
		t.Errorf("%d counter events, want %d", len(counters), memory)
	}
	for _, c := range counters {
		if c.Name != "heap" || c.Args["bytes"] == nil {
			t.Errorf("counter %+v: want heap with bytes", c)
		}
	}

	// Rank 0's blocking allreduce, exactly.
	var found bool
	for _, s := range slices {
		if s.Pid == pidOf(0) && s.Name == "allreduce" {
			found = true
			start, end := allreduceStart(0)-origin, int64(allreduceEnd-origin)
			if *s.Ts != float64(start)/1000 || *s.Dur != float64(end-start)/1000 {
				t.Errorf("allreduce at ts %v dur %v, want %v and %v", *s.Ts, *s.Dur, float64(start)/1000, float64(end-start)/1000)
			}
			if math.Round(*s.Ts*1000) != float64(start) {
				t.Errorf("ts %v does not keep the ns", *s.Ts)
			}
			if s.Cat != "collective" || s.Tid != 1 || s.Args["bytes"] != 4096.0 || s.Args["algo"] != "ring" || s.Args["seq"] != 0.0 || s.Args["predicted_us"] != 10.0 {
				t.Errorf("allreduce %+v", s)
			}
		}
		if s.Pid == pidOf(0) && s.Name == "iallreduce" && threads[[2]int{s.Pid, s.Tid}] != "comm 0 async" {
			t.Errorf("iallreduce on thread %q", threads[[2]int{s.Pid, s.Tid}])
		}
	}
	if !found {
		t.Error("no allreduce on rank 0")
	}

	// One flow per message, bound to its send and its receive.
	if want := len(j.Messages()); len(flows) != want || want != 5 {
		t.Errorf("%d flows for %d messages, want 5", len(flows), want)
	}
	for id, fs := range flows {
		sort.Slice(fs, func(a, b int) bool { return fs[a].Ph > fs[b].Ph }) // s, then f
		if len(fs) != 2 || fs[0].Ph != "s" || fs[1].Ph != "f" || fs[1].BP != "e" {
			t.Errorf("flow %d: %+v, want s then f with bp e", id, fs)
			continue
		}
		for _, f := range fs {
			if f.Cat != "msg" || f.Name != "message" {
				t.Errorf("flow %+v: want cat msg, name message", f)
			}
			bound := false
			for _, s := range slices {
				if s.Pid == f.Pid && s.Tid == f.Tid && (s.Name == "send" || s.Name == "recv" || s.Name == "isend" || s.Name == "irecv") &&
					*s.Ts <= *f.Ts+1e-9 && *f.Ts <= *s.Ts+*s.Dur+1e-9 {
					bound = true
				}
			}
			if !bound {
				t.Errorf("flow event %+v is inside no send or receive on its thread", f)
			}
		}
		if fs[0].Pid == fs[1].Pid {
			t.Errorf("flow %d stays in process %d", id, fs[0].Pid)
		}
	}

	// Slices nest on every thread: the isend and irecv overlap the
	// backward region and must be on threads of their own.
	nestCheck(t, slices)
	if threads[[2]int{pidOf(0), 3}] != "main: non-blocking" {
		t.Errorf("rank 0's third thread is %q, want main: non-blocking", threads[[2]int{pidOf(0), 3}])
	}
}

// nestCheck fails t when two slices on one thread overlap without
// nesting.
func nestCheck(t *testing.T, slices []traceEventJSON) {
	t.Helper()
	by := map[[2]int][]traceEventJSON{}
	for _, s := range slices {
		k := [2]int{s.Pid, s.Tid}
		by[k] = append(by[k], s)
	}
	for k, ss := range by {
		sort.SliceStable(ss, func(a, b int) bool {
			if *ss[a].Ts != *ss[b].Ts {
				return *ss[a].Ts < *ss[b].Ts
			}
			return *ss[a].Dur > *ss[b].Dur
		})
		var ends []float64
		for _, s := range ss {
			for len(ends) > 0 && ends[len(ends)-1] <= *s.Ts {
				ends = ends[:len(ends)-1]
			}
			end := *s.Ts + *s.Dur
			if len(ends) > 0 && end > ends[len(ends)-1]+1e-9 {
				t.Errorf("pid %d tid %d: %s at %v overlaps its parent without nesting", k[0], k[1], s.Name, *s.Ts)
			}
			ends = append(ends, end)
		}
	}
}

func TestTimelineMissingRank(t *testing.T) {
	j := smallJob(t, 4, 3)
	var buf bytes.Buffer
	if err := Timeline(&buf, j); err != nil {
		t.Fatal(err)
	}
	tj := decodeTimeline(t, buf.Bytes())
	procs := 0
	for _, e := range tj.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			procs++
		}
	}
	if procs != 3 {
		t.Errorf("%d processes for 3 traces", procs)
	}
	if m, _ := tj.OtherData["missing"].([]any); len(m) != 1 || m[0] != 3.0 {
		t.Errorf("otherData missing %v, want [3]", tj.OtherData["missing"])
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return w.n, io.ErrShortWrite
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	j := smallJob(t, 2)
	if err := Timeline(&failWriter{100}, j); err == nil {
		t.Error("Timeline: no error from a failing writer")
	}
	if err := SVG(&failWriter{100}, j, SVGOptions{}); err == nil {
		t.Error("SVG: no error from a failing writer")
	}
	if err := HTML(&failWriter{100}, j, analyze(j)); err == nil {
		t.Error("HTML: no error from a failing writer")
	}
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func TestBigJob(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and draws a million events")
	}
	start := time.Now()
	j := bigJob(t)
	events := 0
	for _, r := range j.Present() {
		events += len(r.Events)
	}
	t.Logf("%d events written and loaded in %v", events, time.Since(start))
	if events < 1_000_000 {
		t.Fatalf("%d events, want a million", events)
	}

	var svg bytes.Buffer
	start = time.Now()
	if err := SVG(&svg, j, SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("SVG: %d bytes in %v", svg.Len(), time.Since(start))
	if svg.Len() > 5<<20 {
		t.Errorf("the SVG of a million events is %d bytes, want at most 5 MiB", svg.Len())
	}
	parseSVG(t, svg.Bytes())

	var cw countWriter
	start = time.Now()
	if err := Timeline(&cw, j); err != nil {
		t.Fatal(err)
	}
	t.Logf("Timeline: %d bytes in %v", cw.n, time.Since(start))
}
