package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"report", "timeline", "svg", "html", "pprof", "diff", "np", "n", "q"}
	for _, tc := range []struct{ in, want string }{
		{"reprot", "report"}, {"timelin", "timeline"}, {"svgg", "svg"}, {"htm", "html"},
		{"nq", "np"}, {"xyz", ""}, {"diffs", "diff"}, {"profile", ""},
		// One letter for another is no spelling mistake (-N, -f).
		{"N", ""}, {"f", ""}, {"Q", ""},
	} {
		if got := Closest(tc.in, names); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if d := Distance("kitten", "sitting"); d != 3 {
		t.Errorf("Distance(kitten, sitting) = %d, want 3", d)
	}
}
