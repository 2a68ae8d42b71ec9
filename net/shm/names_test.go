package shm

import (
	"strings"
	"testing"
)

// The names Cleanup takes for a job's files, and the job ids it accepts:
// isSegmentName and validJobID, written by hand where regexps were
// (^(r[0-9]+-[0-9a-f]{16}(\.new|\.bell)?|s[0-9a-f]{16})$ and
// ^[A-Za-z0-9._-]{1,64}$), agree with them.
func TestNames(t *testing.T) {
	const h = "0123456789abcdef"
	for _, tc := range []struct {
		name string
		seg  bool
	}{
		{"r0-" + h, true}, {"r12-" + h + ".new", true}, {"r1-" + h + ".bell", true}, {"s" + h, true},
		{"r-" + h, false}, {"r1-" + strings.ToUpper(h), false}, {"r1-" + h[1:], false}, {"r1-" + h + "0", false},
		{"r1-" + h + ".old", false}, {"r1-" + h + ".new.bell", false}, {"s" + h + ".new", false}, {"sx" + h[1:], false},
		{"r1x-" + h, false}, {"r1-.bell", false}, {"x", false}, {"", false},
	} {
		if got := isSegmentName(tc.name); got != tc.seg {
			t.Errorf("isSegmentName(%q) = %v, want %v", tc.name, got, tc.seg)
		}
	}
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true}, {"abc-12_3.X", true}, {strings.Repeat("a", 64), true},
		{"", false}, {strings.Repeat("a", 65), false}, {"a/b", false}, {"a b", false}, {"Ä", false}, {"..\x00", false},
	} {
		if got := validJobID(tc.id); got != tc.ok {
			t.Errorf("validJobID(%q) = %v, want %v", tc.id, got, tc.ok)
		}
	}
}
