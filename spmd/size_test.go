package spmd

import "testing"

func TestParseSize(t *testing.T) {
	tests := map[string]int{"8": 8, "4K": 4096, "64M": 64 << 20, "1G": 1 << 30, "2KiB": 2048, "16MB": 16 << 20, "0": 0, "256k": 256 << 10}
	for in, want := range tests {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "4X", "1.5M"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) succeeded", bad)
		}
	}
}
