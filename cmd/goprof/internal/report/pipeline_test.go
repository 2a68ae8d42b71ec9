package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/synth"
)

// TestPipeline: two stages running GPipe with 2 micro-batches, forwards
// of 1 ms and backwards of 2 ms, on skewed clocks: each step spans 9 ms
// and each stage computes 6 of them, a bubble of 1/3, (p-1)/(m+p-1).
// The first step, whose schedule rank 0 ends 6 ms late (warm-up), is
// left out.
func TestPipeline(t *testing.T) {
	ms := time.Millisecond
	sc := scenario{name: "pipeline", size: 2, skew: map[int]time.Duration{1: 2 * time.Second}, build: func(j *synth.Job) {
		for step := range 3 {
			t0 := time.Duration(step) * 20 * ms
			s0, s1 := j.Rank(0), j.Rank(1)
			end := t0 + 9*ms
			if step == 0 {
				end += 6 * ms
			}
			s0.Region("pipeline", t0, end)
			s0.Region("pipe forward", t0, t0+1*ms)
			s0.Region("pipe forward", t0+1*ms, t0+2*ms)
			s0.Region("pipe backward", t0+5*ms, t0+7*ms)
			s0.Region("pipe backward", t0+7*ms, t0+9*ms)
			s1.Region("pipeline", t0, t0+7*ms)
			s1.Region("pipe forward", t0+1*ms, t0+2*ms)
			s1.Region("pipe forward", t0+2*ms, t0+3*ms)
			s1.Region("pipe backward", t0+3*ms, t0+5*ms)
			s1.Region("pipe backward", t0+5*ms, t0+7*ms)
		}
	}}
	j, err := job.Load(build(t, sc))
	if err != nil {
		t.Fatal(err)
	}
	r := Analyze(j)
	p := r.Pipeline
	if p == nil {
		t.Fatal("no pipeline section")
	}
	if p.Steps != 2 || p.Warmup != 1 || p.Span != int64(9*ms) {
		t.Errorf("%d steps (after %d) of %v, want 2 of 9ms after 1", p.Steps, p.Warmup, time.Duration(p.Span))
	}
	for _, x := range p.PerRank {
		if x.Busy != int64(6*ms) || !close3(x.Bubble, 1.0/3) {
			t.Errorf("rank %d: busy %v bubble %.4f, want 6ms and 1/3", x.Rank, time.Duration(x.Busy), x.Bubble)
		}
	}
	if !close3(p.Bubble, 1.0/3) || !close3(p.Median, 1.0/3) {
		t.Errorf("bubble %.4f, median %.4f, want 1/3", p.Bubble, p.Median)
	}
	var b bytes.Buffer
	if err := r.Text(&b); err != nil || !strings.Contains(b.String(), "span 9ms a step, bubble 33.3% of it") {
		t.Errorf("text (%v):\n%s", err, b.String())
	}
}

func close3(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
