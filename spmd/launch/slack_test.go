package launch

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

func TestParseTimerSlack(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", -1, true}, {"auto", -1, true}, {"0", 0, true}, {"0s", 0, true},
		{"500us", 500 * time.Microsecond, true}, {"1s", time.Second, true},
		{"2s", 0, false}, {"-1ms", 0, false}, {"5", 0, false}, {"none", 0, false},
	} {
		got, err := parseTimerSlack(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseTimerSlack(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestSlackFor: auto gives a Go program (this test binary) bound alone to
// one CPU, on a host of at most 2 ranks, its slack and nothing to one of
// 16 ranks, to an unbound one, one bound to 2 CPUs (a
// core's hardware threads) or to a CPU another rank shares, or another
// program (a shell); a chosen slack goes to every rank.
func TestSlackFor(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bound, unbound := binding{cpus: []int{0}, ranks: 1}, binding{}
	core := binding{cpus: []int{0, 8}, ranks: 1} // a core's two hardware threads
	shared := binding{cpus: []int{0}, ranks: 2}  // :overload-allowed
	for _, tc := range []struct {
		name string
		env  []string
		b    binding
		path string
		want time.Duration
	}{
		{"auto, bound Go", nil, bound, self, autoTimerSlack},
		{"auto, bound Go, 2 ranks on the host", nil, binding{cpus: []int{0}, ranks: 1, host: 2}, self, autoTimerSlack},
		{"auto, bound Go, 16 ranks on the host", nil, binding{cpus: []int{0}, ranks: 1, host: 16}, self, 0},
		{"auto, unbound Go", nil, unbound, self, 0},
		{"auto, Go bound to 2 CPUs", nil, core, self, 0},
		{"auto, Go bound to a CPU it shares", nil, shared, self, 0},
		{"chosen, Go bound to 2 CPUs", []string{contract.EnvTimerSlack + "=1ms"}, core, self, time.Millisecond},
		{"auto, bound shell", nil, bound, "/bin/sh", 0},
		{"auto, missing program", nil, bound, "/nonexistent", 0},
		{"0", []string{contract.EnvTimerSlack + "=0s"}, bound, self, 0},
		{"chosen", []string{contract.EnvTimerSlack + "=2ms"}, unbound, "/bin/sh", 2 * time.Millisecond},
		{"last wins", []string{contract.EnvTimerSlack + "=2ms", contract.EnvTimerSlack + "=auto"}, unbound, self, 0},
	} {
		got, err := slackFor(tc.env, tc.b, tc.path)
		_, chosen := envValue(tc.env, contract.EnvTimerSlack)
		if err != nil || got.d != tc.want || got.auto != (!chosen && tc.want > 0) {
			t.Errorf("%s: slackFor = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := slackFor([]string{contract.EnvTimerSlack + "=fast"}, bound, self); !errors.Is(err, ErrUsage) {
		t.Errorf("slackFor took %s=fast: %v", contract.EnvTimerSlack, err)
	}
}
