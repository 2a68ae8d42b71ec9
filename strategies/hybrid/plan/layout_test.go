package plan

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// smallJob is the enumeration's test job: 4 layers, 4 heads, 8 sequences
// on 8 ranks of one host.
func smallJob() Job {
	return Job{
		Model: nn.GPTConfig{Vocab: 256, Context: 64, Layers: 4, Heads: 4, Dim: 64},
		Seq:   32, GlobalBatch: 8, Ranks: 8, RanksPerHost: 8,
	}
}

// TestLayoutsCount checks the enumeration against a count by hand. The
// degrees (TP divides 4 heads, PP·1 divides 4 layers, DP = 8/TP/PP) are
// 8 triples; Micro divides GlobalBatch/DP; ZeRO 0-3 for PP 1 and DP > 1,
// 0-1 for PP > 1 and DP > 1, 0 for DP 1; schedules 1 for PP 1, else GPipe
// and 1F1B plus interleaved v2 when Micro%PP == 0 and 2·PP divides 4;
// sequence parallelism doubles TP > 1 (T = 32 divides by every TP).
func TestLayoutsCount(t *testing.T) {
	want := map[string]int{
		"tp1 pp1 dp8": 1 * 4 * 1,               // m1; zero 0-3
		"tp1 pp2 dp4": (2 + 3) * 2,             // m1: gpipe, 1f1b; m2: + v2; zero 0-1
		"tp1 pp4 dp2": 3 * 2 * 2,               // m1, m2, m4; gpipe, 1f1b (v2 needs 8 | 4); zero 0-1
		"tp2 pp1 dp4": 2 * 4 * 2,               // m1, m2; zero 0-3; sp
		"tp2 pp2 dp2": (2 + 3 + 3) * 2 * 2,     // m1: 2, m2: 3, m4: 3 schedules; zero 0-1; sp
		"tp2 pp4 dp1": 4 * 2 * 2,               // m1-m8; gpipe, 1f1b; sp
		"tp4 pp1 dp2": 3 * 4 * 2,               // m1, m2, m4; zero 0-3; sp
		"tp4 pp2 dp1": (2 + 3 + 3 + 3) * 1 * 2, // m1-m8; sp
	}
	got := map[string]int{}
	total := 0
	for _, l := range Layouts(smallJob()) {
		got[fmt.Sprintf("tp%d pp%d dp%d", l.TP, l.PP, l.DP)]++
		total++
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d layouts, want %d", k, got[k], n)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected degrees", k)
		}
	}
	if total != 136 {
		t.Errorf("%d layouts, want 136", total)
	}
}

func TestLayoutsNamed(t *testing.T) {
	names := map[string]bool{}
	for _, l := range Layouts(smallJob()) {
		names[l.String()] = true
	}
	tests := []struct {
		name   string
		layout string
		want   bool
	}{
		{"hybrid", "tp2 pp2 dp2 zero1 m4 1f1b", true},
		{"hybrid sp", "tp2 pp2 dp2 zero0 m2 gpipe sp", true},
		{"interleaved", "tp1 pp2 dp4 zero1 m2 interleaved v2", true},
		{"pure dp zero3", "tp1 pp1 dp8 zero3 m1 1f1b", true},
		{"tp8: 4 heads", "tp8 pp1 dp1 zero0 m1 1f1b", false},
		{"zero2 with pp2", "tp1 pp2 dp4 zero2 m2 1f1b", false},
		{"interleaved m%p != 0", "tp2 pp4 dp1 zero0 m2 interleaved v2", false},
		{"interleaved pp·v over layers", "tp1 pp2 dp4 zero0 m2 interleaved v4", false},
		{"gpipe with pp1", "tp1 pp1 dp8 zero0 m1 gpipe", false},
		{"sp with tp1", "tp1 pp1 dp8 zero0 m1 1f1b sp", false},
		{"zero with dp1", "tp2 pp4 dp1 zero1 m1 1f1b", false},
		{"micro beyond batch", "tp1 pp1 dp8 zero0 m2 1f1b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if names[tt.layout] != tt.want {
				t.Errorf("%q listed: %v, want %v", tt.layout, names[tt.layout], tt.want)
			}
		})
	}
}

func TestLayoutsAllCheck(t *testing.T) {
	job := smallJob()
	seen := map[Layout]bool{}
	for _, l := range Layouts(job) {
		if err := job.Check(l); err != nil {
			t.Errorf("%v: %v", l, err)
		}
		if seen[l] {
			t.Errorf("%v listed twice", l)
		}
		seen[l] = true
	}
}

func TestCheck(t *testing.T) {
	job := smallJob()
	ok := Layout{TP: 2, PP: 2, DP: 2, Zero: 1, Micro: 4, Schedule: ScheduleInterleaved, Virtual: 2, SeqParallel: true}
	if err := job.Check(ok); err != nil {
		t.Fatalf("%v: %v", ok, err)
	}
	tests := []struct {
		name   string
		change func(*Layout)
	}{
		{"zero degree", func(l *Layout) { l.TP = 0 }},
		{"ranks", func(l *Layout) { l.DP = 4 }},
		{"zero stage", func(l *Layout) { l.Zero = 4 }},
		{"zero2 pp", func(l *Layout) { l.Zero = 2 }},
		{"schedule", func(l *Layout) { l.Schedule = "zb" }},
		{"virtual 0", func(l *Layout) { l.Virtual = 0 }},
		{"micro 0", func(l *Layout) { l.Micro = 0 }},
		{"micro 3", func(l *Layout) { l.Micro = 3 }},
		{"virtual with 1f1b", func(l *Layout) { l.Schedule = Schedule1F1B }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := ok
			tt.change(&l)
			if err := job.Check(l); !errors.Is(err, ErrLayout) {
				t.Errorf("%v: got %v, want ErrLayout", l, err)
			}
			e := EstimateLayout(job, Machine{Flops: 1e9}, l)
			if e.Fits || e.Step == 0 || len(e.Reasons) != 1 {
				t.Errorf("estimate of invalid %v: fits %v step %v reasons %q", l, e.Fits, e.Step, e.Reasons)
			}
		})
	}
}

func TestLayoutString(t *testing.T) {
	tests := []struct {
		l    Layout
		want string
	}{
		{Layout{TP: 2, PP: 2, DP: 2, Zero: 1, Micro: 4, Schedule: Schedule1F1B, Virtual: 1}, "tp2 pp2 dp2 zero1 m4 1f1b"},
		{Layout{TP: 2, PP: 2, DP: 2, Micro: 4, Schedule: ScheduleInterleaved, Virtual: 2, SeqParallel: true},
			"tp2 pp2 dp2 zero0 m4 interleaved v2 sp"},
		{Layout{TP: 1, PP: 4, DP: 2, Micro: 8, Schedule: ScheduleGPipe, Virtual: 1}, "tp1 pp4 dp2 zero0 m8 gpipe"},
	}
	for _, tt := range tests {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// TestLayoutsTPInHost keeps TP inside a host: on hosts of 2 ranks TP 4
// is gone while TP 2 stays.
func TestLayoutsTPInHost(t *testing.T) {
	job := smallJob()
	job.RanksPerHost = 2
	tp := map[int]bool{}
	for _, l := range Layouts(job) {
		tp[l.TP] = true
	}
	if tp[4] || !tp[2] || !tp[1] {
		t.Errorf("TP degrees on hosts of 2: %v, want 1 and 2", tp)
	}
}
