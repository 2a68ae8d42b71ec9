package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/synth"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

var update = flag.Bool("update", false, "rewrite the golden reports")

const ms = time.Millisecond

// scenario is a synthetic job built to hold a known answer, and the check
// of that answer.
type scenario struct {
	name  string
	size  int
	skew  map[int]time.Duration
	build func(j *synth.Job)
	check func(t *testing.T, r *Report)
}

var scenarios = []scenario{
	{
		// Rank 2 posts its receive at 10 ms; rank 1 sends at 60 ms: 50 ms
		// lost on rank 2, made by rank 1. Rank 1's clock runs 3 s ahead.
		name: "late_sender", size: 4, skew: map[int]time.Duration{1: 3 * time.Second},
		build: func(j *synth.Job) {
			j.Rank(2).Recv(1, 7, 1024, 10*ms, 61*ms)
			j.Rank(1).Send(2, 7, 1024, 60*ms, 61*ms)
			// An early sender: the receive was posted after the send.
			j.Rank(0).Send(3, 1, 8, 20*ms, 21*ms)
			j.Rank(3).Recv(0, 1, 8, 30*ms, 30*ms+10*time.Microsecond)
			// A non-blocking receive posted at 5 ms, waited for from 40 ms,
			// sent at 70 ms: 30 ms lost in the wait.
			j.Rank(3).Irecv(0, 2, 64, 5*ms, 40*ms, 71*ms)
			j.Rank(0).Send(3, 2, 64, 70*ms, 71*ms)
			for r := 0; r < 4; r++ {
				j.Rank(r).Region("work", 0, 100*ms)
			}
		},
		check: func(t *testing.T, r *Report) {
			ls := r.LateSender
			if ls.Total != int64(80*ms) || ls.Count != 2 || len(ls.Pairs) != 2 {
				t.Fatalf("late sender %+v, want 50ms and 30ms", ls)
			}
			if p := ls.Pairs[0]; p.Sender != 1 || p.Receiver != 2 || p.Total != int64(50*ms) {
				t.Errorf("late pair %+v, want rank 1 -> rank 2, 50ms", p)
			}
			if p := ls.Pairs[1]; p.Sender != 0 || p.Receiver != 3 || p.Total != int64(30*ms) {
				t.Errorf("late pair %+v, want rank 0 -> rank 3, 30ms", p)
			}
		},
	},
	{
		// Ten all-reduces that rank 3 enters 5 ms after the others.
		name: "straggler", size: 4,
		build: func(j *synth.Job) {
			for i := 0; i < 10; i++ {
				t0 := time.Duration(i) * 20 * ms
				for r := 0; r < 4; r++ {
					enter := t0 + 10*ms
					if r == 3 {
						enter += 5 * ms
					}
					j.Rank(r).Region("compute", t0, enter)
					j.Rank(r).Collective(synth.Coll{Op: "allreduce", Algo: "ring", Bytes: 4 << 20, Predicted: 2 * ms, Site: "main.train main/train.go:42"}, enter, t0+17*ms)
				}
			}
		},
		check: func(t *testing.T, r *Report) {
			if len(r.Stragglers) != 1 || r.Stragglers[0].Rank != 3 || r.Stragglers[0].Last != 10 {
				t.Fatalf("stragglers %+v, want rank 3 last 10 times", r.Stragglers)
			}
			cw := r.CollWait
			if cw.Instances != 10 || cw.Total != int64(3*10*5*ms) {
				t.Errorf("wait at collective %v over %d, want 150ms over 10", time.Duration(cw.Total), cw.Instances)
			}
			for _, w := range cw.PerRank {
				want := int64(50 * ms)
				if w.Rank == 3 {
					want = 0
				}
				if w.Wait != want {
					t.Errorf("rank %d waited %v at collectives, want %v", w.Rank, time.Duration(w.Wait), time.Duration(want))
				}
			}
			if len(r.Bandwidth) != 1 || r.Bandwidth[0].Time != int64(2*ms) || r.Bandwidth[0].Predicted != int64(2*ms) {
				t.Errorf("bandwidth %+v, want one row of 2ms, 2ms predicted", r.Bandwidth)
			}
			if len(r.Sites) != 1 || r.Sites[0].Site != "main.train main/train.go:42" || r.Sites[0].Count != 40 {
				t.Errorf("sites %+v", r.Sites)
			}
		},
	},
	{
		// A loop whose rank 3 computes twice as long, then a barrier.
		name: "imbalance", size: 4,
		build: func(j *synth.Job) {
			for i := 0; i < 5; i++ {
				t0 := time.Duration(i) * 21 * ms
				for r := 0; r < 4; r++ {
					d := 10 * ms
					if r == 3 {
						d = 20 * ms
					}
					j.Rank(r).Region("compute", t0, t0+d)
					j.Rank(r).Collective(synth.Coll{Op: "barrier", Algo: "dissemination"}, t0+d, t0+21*ms)
				}
			}
		},
		check: func(t *testing.T, r *Report) {
			im := r.Imbalance
			if im.MostLoaded != 3 {
				t.Errorf("most loaded rank %d, want 3", im.MostLoaded)
			}
			// App times 10,10,10,20 x5 (the last barrier ends the wall).
			if got := r.POP.LoadBalance; math.Abs(got-0.625) > 1e-9 {
				t.Errorf("load balance %v, want 0.625", got)
			}
			if im.AppCV < 0.3 || im.AppCV > 0.4 { // population cv of 10,10,10,20 is 0.3464
				t.Errorf("app cv %v, want 0.346", im.AppCV)
			}
		},
	},
	{
		// Overlapped: the bucket's all-reduce runs 40-85 ms on the executor
		// while backward computes until 80; the driver waits 80-85.
		name: "step_overlapped", size: 2,
		build: func(j *synth.Job) {
			for r := 0; r < 2; r++ {
				x := j.Rank(r)
				x.Region("step", 0, 100*ms)
				x.Region("forward", 0, 30*ms)
				x.Region("backward", 30*ms, 80*ms)
				x.Collective(synth.Coll{Op: "allreduce", Algo: "ring", Bytes: 1 << 20, NonBlocking: true}, 40*ms, 85*ms)
				x.Region("wait", 80*ms, 85*ms)
				x.Region("optimizer", 85*ms, 100*ms)
				x.Heap(50*ms, 64<<20)
			}
		},
		check: func(t *testing.T, r *Report) {
			s := r.Steps
			if s == nil {
				t.Fatal("no step breakdown")
			}
			want := StepBreakdown{Steps: 1, Step: int64(100 * ms), Compute: int64(95 * ms), Exposed: int64(5 * ms), Overlapped: int64(40 * ms), Idle: 0}
			if s.Steps != want.Steps || s.Step != want.Step || s.Compute != want.Compute || s.Exposed != want.Exposed || s.Overlapped != want.Overlapped || s.Idle != want.Idle {
				t.Errorf("steps %+v, want %+v", *s, want)
			}
			if math.Abs(s.Hidden-40.0/45) > 1e-9 {
				t.Errorf("hidden %v, want %v", s.Hidden, 40.0/45)
			}
			if r.Ranks[0].HeapPeak != 64<<20 {
				t.Errorf("heap peak %d", r.Ranks[0].HeapPeak)
			}
		},
	},
	{
		// Not overlapped: a blocking all-reduce 70-90 ms after backward.
		name: "step_blocking", size: 2,
		build: func(j *synth.Job) {
			for r := 0; r < 2; r++ {
				x := j.Rank(r)
				x.Region("step", 0, 100*ms)
				x.Region("forward", 0, 30*ms)
				x.Region("backward", 30*ms, 70*ms)
				x.Collective(synth.Coll{Op: "allreduce", Algo: "ring", Bytes: 1 << 20}, 70*ms, 90*ms)
				x.Region("optimizer", 90*ms, 100*ms)
			}
		},
		check: func(t *testing.T, r *Report) {
			s := r.Steps
			if s == nil {
				t.Fatal("no step breakdown")
			}
			if s.Compute != int64(80*ms) || s.Exposed != int64(20*ms) || s.Overlapped != 0 || s.Idle != 0 || s.Hidden != 0 {
				t.Errorf("steps %+v, want 80ms compute, 20ms exposed, nothing hidden", *s)
			}
		},
	},
}

func build(t testing.TB, sc scenario) string {
	dir := filepath.Join(t.TempDir(), sc.name)
	j, err := synth.New(dir, sc.size, synth.Options{Skew: sc.skew, Program: "synthetic " + sc.name})
	if err != nil {
		t.Fatal(err)
	}
	sc.build(j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGolden checks each scenario's answer, and that its text and JSON
// reports are the golden ones (-update rewrites them).
func TestGolden(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			dir := build(t, sc)
			j, err := job.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(j.Problems) > 0 {
				t.Errorf("problems: %q", j.Problems)
			}
			r := Analyze(j)
			sc.check(t, r)
			r.Job.Dir = sc.name // not the temporary directory
			var text, js bytes.Buffer
			if err := r.Text(&text); err != nil {
				t.Fatal(err)
			}
			enc := json.NewEncoder(&js)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", sc.name+".txt"), text.Bytes())
			golden(t, filepath.Join("testdata", sc.name+".json"), js.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the report says now (go test -update rewrites it):\n%s", path, got)
	}
}

// TestSkewAligned: the late sender is found only because rank 1's clock,
// 3 s ahead, is put back on rank 0's; without the offset the send would
// seem to come 3 s after the receive ended.
func TestSkewAligned(t *testing.T) {
	sc := scenarios[0]
	j, err := job.Load(build(t, sc))
	if err != nil {
		t.Fatal(err)
	}
	find := func(r int, k trace.Kind) trace.Event {
		for _, e := range j.Ranks[r].Events {
			if e.Kind == k {
				return e
			}
		}
		t.Fatalf("rank %d has no %s", r, k)
		return trace.Event{}
	}
	send, recv := find(1, trace.SendEvent), find(2, trace.RecvEvent)
	if got := time.Duration(send.Start - recv.Start); got != 50*ms {
		t.Errorf("aligned send starts %v after the receive, want 50ms", got)
	}
	if j.Ranks[1].Offset != int64(-3*time.Second) {
		t.Errorf("rank 1's offset %v, want -3s", time.Duration(j.Ranks[1].Offset))
	}
}

func TestSpans(t *testing.T) {
	s := spans{{0, 10}, {5, 20}, {30, 40}}.union()
	if len(s) != 2 || s.length() != 30 {
		t.Fatalf("union %v", s)
	}
	u := spans{{8, 12}, {35, 50}}.union()
	if got := s.intersect(u).length(); got != 4+5 {
		t.Errorf("intersect %d, want 9", got)
	}
	if got := s.minus(u); got.length() != 30-9 || len(got) != 3 {
		t.Errorf("minus %v", got)
	}
	if got := s.clip(5, 35).length(); got != 15+5 {
		t.Errorf("clip %d", got)
	}
}

// TestDiff compares the blocking step with the overlapped one: the golden
// diff shows exposed communication falling from 20 ms to 5 ms.
func TestDiff(t *testing.T) {
	var rs []*Report
	for _, name := range []string{"step_blocking", "step_overlapped"} {
		for _, sc := range scenarios {
			if sc.name != name {
				continue
			}
			j, err := job.Load(build(t, sc))
			if err != nil {
				t.Fatal(err)
			}
			r := Analyze(j)
			r.Job.Dir = name
			rs = append(rs, r)
		}
	}
	var b bytes.Buffer
	if err := Diff(&b, rs[0], rs[1]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "exposed comm   20ms    5ms  -75.0%") {
		t.Errorf("the diff does not show exposed communication 20ms -> 5ms:\n%s", b.String())
	}
	golden(t, filepath.Join("testdata", "diff.txt"), b.Bytes())
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want string
	}{{0, "0ns"}, {999, "999ns"}, {1000, "1µs"}, {12345, "12.3µs"}, {999_960_000, "1s"}, {999_400_000, "999ms"}, {-1500, "-1.5µs"}, {7_890_000_000, "7.89s"}} {
		if got := Dur(tc.ns); got != tc.want {
			t.Errorf("Dur(%d) = %q, want %q", tc.ns, got, tc.want)
		}
	}
	for _, tc := range []struct {
		n    int64
		want string
	}{{8, "8B"}, {1024, "1KiB"}, {1536, "1.5KiB"}, {1048575, "1MiB"}, {64 << 20, "64MiB"}} {
		if got := Size(tc.n); got != tc.want {
			t.Errorf("Size(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestStepShares: the step's line lists the shares that partition it,
// which sum to 100%, and shows the overlapped communication as a part of
// the compute, not beside it (it is inside the compute's time).
func TestStepShares(t *testing.T) {
	for _, sc := range scenarios {
		if sc.name != "step_overlapped" {
			continue
		}
		j, err := job.Load(build(t, sc))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Analyze(j).Text(&b); err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "  step ") {
				line = l
			}
		}
		sum := 0.0
		for _, f := range strings.Fields(line) {
			var p float64
			if _, err := fmt.Sscanf(f, "(%f%%)", &p); err == nil {
				sum += p
			}
		}
		if math.Abs(sum-100) > 0.2 || strings.Contains(line, "overlapped") {
			t.Errorf("the step's line %q: shares sum to %.1f%%, want 100%% and no overlapped share beside compute's", line, sum)
		}
		if want := "compute overlapped with communication: 40ms (42.1% of compute, 40.0% of the step)"; !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}
