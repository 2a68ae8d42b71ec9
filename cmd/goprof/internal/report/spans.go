package report

import "sort"

// span is a time interval [a, b).
type span struct{ a, b int64 }

// spans is a set of intervals; union makes it sorted and disjoint.
type spans []span

// union returns s sorted, with overlapping intervals merged.
func (s spans) union() spans {
	if len(s) == 0 {
		return nil
	}
	sort.Slice(s, func(i, j int) bool { return s[i].a < s[j].a })
	out := spans{s[0]}
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if x.a <= last.b {
			last.b = max(last.b, x.b)
		} else if x.b > x.a {
			out = append(out, x)
		}
	}
	return out
}

// length returns the total length of disjoint s.
func (s spans) length() int64 {
	var n int64
	for _, x := range s {
		n += x.b - x.a
	}
	return n
}

// intersect returns the intersection of disjoint sorted s and t.
func (s spans) intersect(t spans) spans {
	var out spans
	i, k := 0, 0
	for i < len(s) && k < len(t) {
		a, b := max(s[i].a, t[k].a), min(s[i].b, t[k].b)
		if a < b {
			out = append(out, span{a, b})
		}
		if s[i].b < t[k].b {
			i++
		} else {
			k++
		}
	}
	return out
}

// minus returns disjoint sorted s less disjoint sorted t.
func (s spans) minus(t spans) spans {
	var out spans
	k := 0
	for _, x := range s {
		a := x.a
		for k < len(t) && t[k].b <= a {
			k++
		}
		for j := k; j < len(t) && t[j].a < x.b; j++ {
			if t[j].a > a {
				out = append(out, span{a, t[j].a})
			}
			a = max(a, t[j].b)
		}
		if a < x.b {
			out = append(out, span{a, x.b})
		}
	}
	return out
}

// clip returns disjoint s within [a, b).
func (s spans) clip(a, b int64) spans { return s.intersect(spans{{a, b}}) }

// near returns the part of disjoint sorted s that may overlap w: the
// intervals from the last one starting before w.a to the last starting
// before w.b, found by bisection.
func (s spans) near(w span) spans {
	lo := sort.Search(len(s), func(i int) bool { return s[i].b > w.a })
	hi := sort.Search(len(s), func(i int) bool { return s[i].a >= w.b })
	if lo >= hi {
		return nil
	}
	return s[lo:hi]
}
