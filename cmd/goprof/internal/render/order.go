package render

import (
	"cmp"
	"slices"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// order returns the indices of evs in drawing order: by start, and of the
// events that start together the longest first, so that a region comes
// before the events nested in it (the recorder writes a region when it
// ends, after them). job.Load sorts events by start; order sorts them
// again when they are not.
func order(evs []trace.Event) []int32 {
	idx := make([]int32, len(evs))
	for i := range idx {
		idx[i] = int32(i)
	}
	if !slices.IsSortedFunc(evs, func(a, b trace.Event) int { return cmp.Compare(a.Start, b.Start) }) {
		slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(evs[a].Start, evs[b].Start) })
	}
	for i := 0; i < len(idx); {
		k := i + 1
		for k < len(idx) && evs[idx[k]].Start == evs[idx[i]].Start {
			k++
		}
		if k-i > 1 {
			slices.SortStableFunc(idx[i:k], func(a, b int32) int { return cmp.Compare(evs[b].End, evs[a].End) })
		}
		i = k
	}
	return idx
}

// tracks returns the string ids of r's tracks in the order they first
// appear, the main track (id 0) first whether or not it has events.
func tracks(r *job.Rank) []uint32 {
	ts := []uint32{0}
	seen := map[uint32]bool{0: true}
	for i := range r.Events {
		if t := r.Events[i].Track; !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	return ts
}

// trackName is what a track is called: "main" for the main track.
func trackName(j *job.Job, id uint32) string {
	if id == 0 || j.Str(id) == "" {
		return "main"
	}
	return j.Str(id)
}

// nester finds how deep regions nest on one track, given in drawing
// order.
type nester struct{ ends []int64 }

// depth returns how many earlier regions enclose [start, end) and
// remembers this one.
func (n *nester) depth(start, end int64) int {
	for len(n.ends) > 0 && n.ends[len(n.ends)-1] <= start && n.ends[len(n.ends)-1] < end {
		n.ends = n.ends[:len(n.ends)-1]
	}
	d := len(n.ends)
	n.ends = append(n.ends, end)
	return d
}
