package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/synth"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// TestCrashedRank: a rank whose trace has no events, or stops early, is
// left out of the figures that compare ranks, and the report says so in
// a note. Load balance and the regions' cv come out as if the rank were
// not in the job (--rank 0-2); bandwidth is timed only from the calls
// every member recorded.
func TestCrashedRank(t *testing.T) {
	write := func(t *testing.T) string {
		dir := t.TempDir()
		j, err := synth.New(dir, 4, synth.Options{})
		if err != nil {
			t.Fatal(err)
		}
		j.Training(4000)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	jsonReport := func(t *testing.T, args ...string) *report.Report {
		t.Helper()
		r := goprof(t, append([]string{"report", "--json"}, args...)...)
		r.want(t, 0)
		var rep report.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		return &rep
	}
	whole := jsonReport(t, write(t))
	wholeCalls := map[string]int{}
	for _, b := range whole.Bandwidth {
		wholeCalls[b.Op+b.Algo] += b.Calls
	}

	for _, tc := range []struct {
		name string
		cut  func(b []byte) int // where rank 3's file stops
		note string
	}{
		{"no events", headerEnd, "rank 3's trace has no events (the rank died?): left out of load balance"},
		{"cut short", func(b []byte) int { return len(b) / 2 }, "rank 3's trace is cut short (the rank died, was killed or runs still): left out of load balance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t)
			path := filepath.Join(dir, trace.FileName(3))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b[:tc.cut(b)], 0o644); err != nil {
				t.Fatal(err)
			}
			goprof(t, "report", dir).want(t, 0, "note:     "+tc.note, "Load balance (rank 3 left out: see the notes)")
			rep := jsonReport(t, dir)
			if len(rep.Job.LeftOut) != 1 || rep.Job.LeftOut[0] != 3 || len(rep.Job.Cut) != 1 || rep.Job.Cut[0] != 3 {
				t.Errorf("left out %v, cut short %v; want rank 3 in both", rep.Job.LeftOut, rep.Job.Cut)
			}
			three := jsonReport(t, "--rank", "0-2", dir)
			if rep.Imbalance != three.Imbalance || rep.POP != three.POP {
				t.Errorf("imbalance %+v, POP %+v;\nwant those of ranks 0-2 alone: %+v, %+v", rep.Imbalance, rep.POP, three.Imbalance, three.POP)
			}
			if rep.POP.LoadBalance < 0.9 {
				t.Errorf("load balance %.3f: the crashed rank counts as idle", rep.POP.LoadBalance)
			}
			cvs := map[string]float64{}
			for _, g := range three.Regions {
				cvs[g.Name] = g.CV
			}
			for _, g := range rep.Regions {
				if g.CV != cvs[g.Name] {
					t.Errorf("region %s: cv %.3f, want %.3f as for ranks 0-2", g.Name, g.CV, cvs[g.Name])
				}
			}
			calls := map[string]int{}
			for _, bw := range rep.Bandwidth {
				calls[bw.Op+bw.Algo] += bw.Calls
				if bw.Ranks != 4 {
					t.Errorf("bandwidth of %s %s over %d ranks, want 4", bw.Op, bw.Algo, bw.Ranks)
				}
			}
			for k, n := range calls {
				if n >= wholeCalls[k] {
					t.Errorf("bandwidth of %s timed over %d calls, as many as with rank 3 whole (%d): calls rank 3 lacks are counted", k, n, wholeCalls[k])
				}
			}
		})
	}
}

// headerEnd returns where a trace file's header record ends: the file cut
// there is a rank killed before it recorded anything else.
func headerEnd(b []byte) int {
	at := len(trace.Magic) + 1 // the header's kind byte
	n, w := binary.Uvarint(b[at:])
	return at + w + int(n)
}

// TestRestartedJob: goprof DIR reports a restarted job's last start and
// says where its earlier starts' traces are (gorun's ranks move them to
// DIR/start.K); goprof DIR/start.0 reads the first. A start.K left by
// another run, K not below this start's, is not named.
func TestRestartedJob(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []struct {
		dir     string
		restart int
	}{{filepath.Join(dir, "start.0"), 0}, {dir, 1}, {filepath.Join(dir, "start.1"), 1}} {
		j, err := synth.New(s.dir, 2, synth.Options{Job: fmt.Sprint("start", s.restart), Restart: s.restart})
		if err != nil {
			t.Fatal(err)
		}
		j.Training(200)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := filepath.Join(dir, "start.0")
	r := goprof(t, "report", dir)
	r.want(t, 0, "id start1, start 1 (gorun restarted it once)", "its earlier starts' are in "+first+" (goprof report "+first+")")
	if strings.Contains(r.stdout, "start.1") {
		t.Errorf("the report names start.1, a later start than its own:\n%s", r.stdout)
	}
	goprof(t, "svg", dir, "-o", filepath.Join(t.TempDir(), "x.svg")).want(t, 0, "note: gorun restarted this job", first)
	r = goprof(t, "report", first)
	r.want(t, 0, "id start0,")
	if strings.Contains(r.stdout, "restarted") {
		t.Errorf("the first start's report says it was restarted:\n%s", r.stdout)
	}
}
