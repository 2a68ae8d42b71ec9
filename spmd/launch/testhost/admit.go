package testhost

import "testing"

// Admit begins the New of a rig named rig (netnstest, slurmtest) of n
// units ("hosts", "nodes"): it fails t when n is outside 1 to max, and
// skips t with one line, "rig: reason", when unavailable gives a reason
// why no rig can be built on this machine.
func Admit(t testing.TB, rig string, n, max int, units string, unavailable func() string) {
	t.Helper()
	if n < 1 || n > max {
		t.Fatalf("%s.New: %d %s; want 1 to %d", rig, n, units, max)
	}
	if reason := unavailable(); reason != "" {
		t.Skip(rig + ": " + reason)
	}
}
