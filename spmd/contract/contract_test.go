package contract

import (
	"runtime"
	"testing"
)

func TestHostCPUs(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{
		{"16", 16},
		{"1", 1},
		{"", runtime.NumCPU()},
		{"0", runtime.NumCPU()},
		{"-3", runtime.NumCPU()},
		{"many", runtime.NumCPU()},
	} {
		t.Setenv(EnvHostCPUs, tc.env)
		if got := HostCPUs(); got != tc.want {
			t.Errorf("%s=%q: HostCPUs() = %d, want %d", EnvHostCPUs, tc.env, got, tc.want)
		}
	}
}
