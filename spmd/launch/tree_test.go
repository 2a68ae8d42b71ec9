package launch

import (
	"fmt"
	"strings"
	"testing"
)

func targetsN(n int) []target {
	ts := make([]target, n)
	for i := range ts {
		ts[i] = target{Index: i + 1, Name: fmt.Sprintf("h%d", i+1)}
	}
	return ts
}

func TestSubtree(t *testing.T) {
	for _, tc := range []struct {
		n, radix int
		want     string // host<parent, in host order
	}{
		{1, 32, "h1<"},
		{4, 32, "h1< h2< h3< h4<"},
		{4, 2, "h1< h2<h1 h3< h4<h3"},
		{7, 2, "h1< h2<h1 h3<h1 h4< h5<h4 h6<h4 h7<h6"},
		{5, 1, "h1< h2<h1 h3<h2 h4<h3 h5<h4"},
	} {
		sub, parents := map[int][]target{}, map[int]string{}
		ts := targetsN(tc.n)
		subtreeOf(ts, tc.radix, "", sub, parents)
		var got []string
		for _, h := range ts {
			got = append(got, h.Name+"<"+parents[h.Index])
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%d hosts radix %d: %s, want %s", tc.n, tc.radix, strings.Join(got, " "), tc.want)
		}
	}
}

// TestTreeDepth checks that the spawn tree is O(log n) deep and that no
// node starts more than radix agents.
func TestTreeDepth(t *testing.T) {
	for _, tc := range []struct{ n, radix, maxDepth int }{{1000, 32, 2}, {1000, 2, 10}, {100, 10, 2}} {
		sub, parents := map[int][]target{}, map[int]string{}
		ts := targetsN(tc.n)
		subtreeOf(ts, tc.radix, "", sub, parents)
		children := map[string]int{}
		depth := map[string]int{"": 0}
		max := 0
		for _, h := range ts { // parents come before their children
			p := parents[h.Index]
			children[p]++
			depth[h.Name] = depth[p] + 1
			max = maxInt(max, depth[h.Name])
		}
		for p, c := range children {
			if c > tc.radix {
				t.Errorf("n %d radix %d: %q starts %d agents", tc.n, tc.radix, p, c)
			}
		}
		if max > tc.maxDepth {
			t.Errorf("n %d radix %d: depth %d, want at most %d", tc.n, tc.radix, max, tc.maxDepth)
		}
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
