package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
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
