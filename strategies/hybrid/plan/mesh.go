package plan

// The mesh orders ranks TP innermost, then DP, then PP, and ranks fill
// hosts in order (Job.RanksPerHost each): a group crosses hosts when two
// of its ranks are on different ones, and its collectives then run at the
// far link's α and β.

// rankOf is the rank of TP rank t of DP replica k in stage s.
func rankOf(l Layout, s, k, t int) int { return s*l.TP*l.DP + k*l.TP + t }

// tpCrosses reports whether a TP group of stage s spans hosts.
func (j Job) tpCrosses(l Layout, s int) bool {
	for k := range l.DP {
		if j.host(rankOf(l, s, k, 0)) != j.host(rankOf(l, s, k, l.TP-1)) {
			return true
		}
	}
	return false
}

// dpCrosses reports whether a DP group of stage s spans hosts.
func (j Job) dpCrosses(l Layout, s int) bool {
	for t := range l.TP {
		if j.host(rankOf(l, s, 0, t)) != j.host(rankOf(l, s, l.DP-1, t)) {
			return true
		}
	}
	return false
}

// ppCrosses reports whether a rank of stage s and its peer in stage to
// (the same TP and DP index) are on different hosts.
func (j Job) ppCrosses(l Layout, s, to int) bool {
	for k := range l.DP {
		for t := range l.TP {
			if j.host(rankOf(l, s, k, t)) != j.host(rankOf(l, to, k, t)) {
				return true
			}
		}
	}
	return false
}
