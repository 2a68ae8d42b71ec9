package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// rankJob is a 12-layer model of 8M parameters on 8 ranks.
func rankJob() Job {
	return Job{
		Model: nn.GPTConfig{Vocab: 8192, Context: 256, Layers: 12, Heads: 8, Dim: 256},
		Seq:   256, GlobalBatch: 32, Ranks: 8, RanksPerHost: 8,
	}
}

// freeLinks is a machine whose links cost nothing.
var freeLinks = Machine{Flops: 5e10, MemBandwidth: 1e10}

func pureDP(l Layout) bool { return l.TP == 1 && l.PP == 1 }

// checkOrder checks Rank's order: those that fit first, each group by step.
func checkOrder(t *testing.T, es []Estimate) {
	t.Helper()
	for i := 1; i < len(es); i++ {
		a, b := es[i-1], es[i]
		if (!a.Fits && b.Fits) || (a.Fits == b.Fits && a.Step > b.Step) {
			t.Fatalf("%d: %v (fits %v, %g s) before %v (fits %v, %g s)", i, a.Layout, a.Fits, a.Step, b.Layout, b.Fits, b.Step)
		}
	}
}

func TestRankFreeLinks(t *testing.T) {
	es, err := Rank(rankJob(), freeLinks)
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, es)
	if first := es[0]; !pureDP(first.Layout) || first.DP != 8 {
		t.Errorf("first %v, want tp1 pp1 dp8", first.Layout)
	}
}

// TestRankMemoryLimit sets the limit just below every pure DP layout's
// need: the first choice must change to a layout that fits.
func TestRankMemoryLimit(t *testing.T) {
	job := rankJob()
	es, err := Rank(job, freeLinks)
	if err != nil {
		t.Fatal(err)
	}
	var minPure, minOther int64 = 1 << 62, 1 << 62
	for _, e := range es {
		if pureDP(e.Layout) {
			minPure = min(minPure, e.Memory)
		} else {
			minOther = min(minOther, e.Memory)
		}
	}
	if minOther >= minPure {
		t.Fatalf("the test needs a layout smaller than pure DP's %d; the smallest other needs %d", minPure, minOther)
	}
	job.MemPerRank = minPure - 1
	es, err = Rank(job, freeLinks)
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, es)
	first := es[0]
	if !first.Fits || first.Memory > job.MemPerRank || pureDP(first.Layout) {
		t.Errorf("first %v fits %v memory %d (limit %d), want a fitting TP or PP layout", first.Layout, first.Fits, first.Memory, job.MemPerRank)
	}
	for _, e := range es {
		if pureDP(e.Layout) && (e.Fits || !strings.Contains(e.Reasons[0], "> limit")) {
			t.Errorf("%v: fits %v, reasons %q; want the limit named", e.Layout, e.Fits, e.Reasons)
		}
	}
}

// TestRankSlowNetwork puts the 8 ranks on 2 hosts joined by a slow
// network: the first choice keeps every DP group inside a host (the
// pipeline's small activations cross instead), and pure DP, whose
// gradients cross, takes longer in DP communication alone than the first
// choice's whole step.
func TestRankSlowNetwork(t *testing.T) {
	job := rankJob()
	job.RanksPerHost = 4
	mc := Machine{Flops: 5e10, AlphaNear: 5e-6, BetaNear: 1 / 5e9, AlphaFar: 1e-3, BetaFar: 1 / 1e6, MemBandwidth: 1e10}
	es, err := Rank(job, mc)
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, es)
	first := es[0]
	for s := range first.PP {
		if first.DP > 1 && job.dpCrosses(first.Layout, s) {
			t.Errorf("first %v: its DP group of stage %d crosses hosts", first.Layout, s)
		}
	}
	if first.PP < 2 || first.TP*first.DP > job.RanksPerHost {
		t.Errorf("first %v: want stages of one host each", first.Layout)
	}
	for _, e := range es {
		if e.Layout.String() == "tp1 pp1 dp8 zero0 m1 1f1b" {
			if e.DPComm <= first.Step {
				t.Errorf("pure DP's dp comm %g s is not above the first's step %g s", e.DPComm, first.Step)
			}
			if !strings.Contains(strings.Join(e.Reasons, ";"), "dp collectives cross hosts") {
				t.Errorf("pure DP reasons %q do not name the crossing", e.Reasons)
			}
		}
	}
}

func TestRankErrors(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Job, *Machine)
		kind   error
		field  string
	}{
		{"ranks 0", func(j *Job, _ *Machine) { j.Ranks = 0 }, ErrJob, "Ranks"},
		{"seq > context", func(j *Job, _ *Machine) { j.Seq = 1024 }, ErrJob, "Seq"},
		{"seq 0", func(j *Job, _ *Machine) { j.Seq = 0 }, ErrJob, "Seq"},
		{"global batch 0", func(j *Job, _ *Machine) { j.GlobalBatch = 0 }, ErrJob, "GlobalBatch"},
		{"ranks per host", func(j *Job, _ *Machine) { j.RanksPerHost = -1 }, ErrJob, "RanksPerHost"},
		{"memory", func(j *Job, _ *Machine) { j.MemPerRank = -1 }, ErrJob, "MemPerRank"},
		{"model", func(j *Job, _ *Machine) { j.Model.Heads = 3 }, ErrJob, "Model"},
		{"flops", func(_ *Job, m *Machine) { m.Flops = 0 }, ErrMachine, "Flops"},
		{"beta", func(_ *Job, m *Machine) { m.BetaFar = -1 }, ErrMachine, "BetaFar"},
		{"no layout", func(j *Job, _ *Machine) { j.Ranks, j.RanksPerHost = 7, 7 }, ErrNoLayout, "7 ranks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, mc := rankJob(), freeLinks
			tt.change(&job, &mc)
			es, err := Rank(job, mc)
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.field) || es != nil {
				t.Errorf("got %v (%d estimates), want %v naming %q", err, len(es), tt.kind, tt.field)
			}
		})
	}
	job := rankJob()
	job.Model.Heads = 3
	if err := job.Validate(); !errors.Is(err, nn.ErrConfig) {
		t.Errorf("model error %v does not wrap nn.ErrConfig", err)
	}
}
