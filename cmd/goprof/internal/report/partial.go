package report

import (
	"fmt"
	"slices"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
)

// partial finds the ranks whose traces cannot stand beside the others' in
// the figures that compare ranks (load balance and POP, the regions' cv,
// collective bandwidth): those with no events, and those cut short (no end
// record: the rank died, was killed or runs still) while another rank's
// trace is whole. It sets Job.Cut and Job.LeftOut, adds a note for each
// kind, and returns the ranks left out.
func (r *Report) partial(j *job.Job) map[int]bool {
	var empty, emptyCut, cut []int
	whole := false
	for _, x := range j.Present() {
		switch {
		case len(x.Events) == 0 && !x.Done:
			emptyCut = append(emptyCut, x.Rank)
		case len(x.Events) == 0:
			empty = append(empty, x.Rank)
		case !x.Done:
			cut = append(cut, x.Rank)
		default:
			whole = true
		}
		if !x.Done {
			r.Job.Cut = append(r.Job.Cut, x.Rank)
		}
	}
	const what = "left out of load balance, the regions' cv and collective bandwidth"
	if len(emptyCut) > 0 {
		r.Job.Notes = append(r.Job.Notes, fmt.Sprintf("%s no events (the rank died?): %s", tracesOf(emptyCut, "has", "have"), what))
	}
	if len(empty) > 0 {
		r.Job.Notes = append(r.Job.Notes, fmt.Sprintf("%s no events here: %s", ranks(empty, "has", "have"), what))
	}
	left := append(emptyCut, empty...)
	switch {
	case len(cut) > 0 && whole:
		they := "it"
		if len(cut) > 1 {
			they = "they"
		}
		r.Job.Notes = append(r.Job.Notes, fmt.Sprintf("%s cut short (the rank died, was killed or runs still): left out of load balance and the regions' cv, and the collectives %s did not record out of bandwidth", tracesOf(cut, "is", "are"), they))
		left = append(left, cut...)
	case len(cut) > 0:
		r.Job.Notes = append(r.Job.Notes, fmt.Sprintf("%s cut short (the ranks died, were killed or run still): load balance compares them up to where each stops", tracesOf(cut, "is", "are")))
	}
	out := map[int]bool{}
	for _, x := range left {
		out[x] = true
	}
	slices.Sort(left)
	r.Job.LeftOut = left
	return out
}

// tracesOf says "rank 1's trace has" or "the traces of ranks 1,3 have".
func tracesOf(rs []int, one, many string) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d's trace %s", rs[0], one)
	}
	return fmt.Sprintf("the traces of ranks %s %s", job.Ranges(rs), many)
}

// ranks says "rank 1 has" or "ranks 1,3 have".
func ranks(rs []int, one, many string) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d %s", rs[0], one)
	}
	return fmt.Sprintf("ranks %s %s", job.Ranges(rs), many)
}

// leftOut is what a section that compares ranks adds to its title: "" or
// "; rank 1 left out: see the notes".
func (r *Report) leftOut() string {
	if len(r.Job.LeftOut) == 0 {
		return ""
	}
	return "; " + ranks(r.Job.LeftOut, "", "") + "left out: see the notes"
}
