package launch

import "testing"

func TestCompressCounts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts []int
		want   string
	}{
		{"one node", []int{4}, "4"},
		{"all alike", []int{2, 2, 2}, "2(x3)"},
		{"a run then one", []int{2, 2, 2, 1}, "2(x3),1"},
		{"runs apart", []int{1, 2, 2, 1, 1}, "1,2(x2),1(x2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := compressCounts(tc.counts); got != tc.want {
				t.Errorf("compressCounts(%v) = %q; want %q", tc.counts, got, tc.want)
			}
		})
	}
}
