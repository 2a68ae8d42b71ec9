package prims

import (
	"fmt"
	"time"

	"github.com/gorun-hpc/gorun/topo"
)

// TuneReport is everything one Tune measured, as gorun --tune-json writes
// it: what it ran on, the model's constants (seconds, bytes) and, per
// collective and size, every algorithm's time, the model's choice, the
// table's, and the longer runs of a pick against the model. People plot
// it; bench/replay scores changes to the model against the reports of
// other machines without running there again.
type TuneReport struct {
	Key          TuneKey    `json:"key"`
	MeasuredOn   string     `json:"measured_on"`
	MeasuredAt   time.Time  `json:"measured_at"`
	RankHosts    []string   `json:"rank_hosts"`    // the host of each rank, as the key names it
	SharedMemory bool       `json:"shared_memory"` // whether the ranks shared memory (the Shared algorithms ran)
	Model        topo.Model `json:"model"`
	// OthersCPUShare is the largest share of a host's CPU time that was
	// not the ranks' while they tuned (other processes, the hypervisor's
	// steal), or -1 where the hosts could not say.
	OthersCPUShare float64           `json:"others_cpu_share"`
	Points         []TuneReportPoint `json:"points"`
}

// TuneReportPoint is one collective at one size.
type TuneReportPoint struct {
	Collective string             `json:"collective"`
	Bytes      int                `json:"bytes"`   // as Choose counts them
	Seconds    map[string]float64 `json:"seconds"` // one call, by algorithm
	Model      string             `json:"model"`   // the model's choice
	Kept       string             `json:"kept"`    // the table's
	// LongerRun is the seconds a call of the model's choice and of the
	// sweep's pick in the longer runs that confirmed the pick, if any.
	LongerRun map[string]float64 `json:"longer_run,omitempty"`
}

// Report returns what tn measured as a TuneReport.
func (tn Tuning) Report() TuneReport {
	// The key names the hosts as the table does (in the layout's order);
	// rank_hosts says which is each rank's.
	names := tn.Layout.HostIDs
	if len(tn.Table.Hosts) == len(names) {
		names = tn.Table.Hosts
	}
	ids := make([]string, tn.Layout.Size())
	for h, ranks := range tn.Layout.Hosts {
		for _, r := range ranks {
			ids[r] = names[h]
		}
	}
	r := TuneReport{Key: tn.Table.TuneKey, MeasuredOn: tn.Table.MeasuredOn, MeasuredAt: tn.Table.MeasuredAt,
		RankHosts: ids, SharedMemory: tn.Layout.Shared, Model: tn.Model, OthersCPUShare: -1}
	for _, pt := range tn.Points {
		rp := TuneReportPoint{Collective: pt.Coll.String(), Bytes: pt.Bytes, Seconds: map[string]float64{},
			Model: string(pt.Model), Kept: string(pt.Kept)}
		for i, a := range pt.Algos {
			rp.Seconds[string(a)] = pt.Seconds[i]
		}
		if len(pt.Confirm) == 2 {
			rp.LongerRun = map[string]float64{string(pt.Model): pt.Confirm[0], string(pt.Pick()): pt.Confirm[1]}
		}
		r.Points = append(r.Points, rp)
	}
	return r
}

// Layout returns the layout of the ranks that r measured.
func (r TuneReport) Layout() topo.Layout {
	lay := topo.FromHostIDs(r.RankHosts)
	lay.Shared = r.SharedMemory
	return lay
}

// Check says what makes r unusable, if anything: no ranks, a model that
// is not valid, or a point of an unknown collective or without times.
func (r TuneReport) Check() error {
	if len(r.RankHosts) < 2 {
		return fmt.Errorf("rank_hosts: %d ranks, want 2 or more", len(r.RankHosts))
	}
	if !r.Model.Valid() {
		return fmt.Errorf("model: not valid (negative, not a number, or no cores): %+v", r.Model)
	}
	for i, pt := range r.Points {
		if _, err := topo.ParseCollective(pt.Collective); err != nil {
			return fmt.Errorf("points[%d]: %w", i, err)
		}
		if len(pt.Seconds) == 0 {
			return fmt.Errorf("points[%d] (%s, %d bytes): no times", i, pt.Collective, pt.Bytes)
		}
	}
	return nil
}
