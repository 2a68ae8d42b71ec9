package job

import (
	"fmt"
	"strconv"
	"strings"
)

// Narrow keeps only the ranks in keep (all when nil) and the events that
// start in [from, to) (to <= 0: to the end), on the job's clock; Duration
// becomes that of what is kept (times keep their origin).
func (j *Job) Narrow(keep []int, from, to int64) error {
	if keep != nil {
		want := map[int]bool{}
		for _, r := range keep {
			if r < 0 || r >= j.Size {
				return fmt.Errorf("--rank %d: the job has ranks 0 to %d", r, j.Size-1)
			}
			want[r] = true
		}
		for r := range j.Ranks {
			if !want[r] {
				j.Ranks[r] = nil
			}
		}
		var missing []int
		for _, r := range j.Missing {
			if want[r] {
				missing = append(missing, r)
			}
		}
		j.Missing = missing
	}
	if from <= 0 && to <= 0 {
		first, last := j.span()
		j.Duration = max(last-first, 0)
		return nil
	}
	if to > 0 && to <= from {
		return fmt.Errorf("--to must come after --from")
	}
	for _, r := range j.Present() {
		kept := r.Events[:0]
		for _, e := range r.Events {
			if e.Start >= from && (to <= 0 || e.Start < to) {
				kept = append(kept, e)
			}
		}
		r.Events = kept
	}
	first, last := j.span()
	j.Duration = max(last-first, 0)
	return nil
}

// ParseRanks reads a list of ranks such as "0,2-4".
func ParseRanks(s string) ([]int, error) {
	var rs []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q: want ranks such as 0,2-4", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q: want ranks such as 0,2-4", s)
			}
		}
		for r := a; r <= b; r++ {
			rs = append(rs, r)
		}
	}
	return rs, nil
}
