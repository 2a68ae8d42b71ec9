package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"
)

// TestProcesses runs pingpong under gorun on 2 ranks, in both modes, and
// checks that it prints a positive time for every size from 0 to -max.
func TestProcesses(t *testing.T) {
	bins := proctest.Build(t, "../../cmd/gorun", ".")
	gorunBin, bin := bins[0], bins[1]
	for _, mode := range [][]string{nil, {"-stream"}} {
		t.Run(strings.Join(append([]string{"mode"}, mode...), " "), func(t *testing.T) {
			args := append([]string{"-max", "1KiB", "-iters", "50", "-warmup", "5"}, mode...)
			out, stderr, err := proctest.Run(gorunBin, bin, 2, args...)
			if err != nil {
				t.Fatalf("gorun -np 2 pingpong %v: %v\n%s%s", args, err, out, stderr)
			}
			var sizes []int
			for _, l := range strings.Split(out, "\n") {
				f := strings.Fields(l)
				if len(f) != 3 || strings.HasPrefix(l, "#") {
					continue
				}
				size, err1 := strconv.Atoi(f[0])
				us, err2 := strconv.ParseFloat(f[1], 64)
				if err1 != nil || err2 != nil || us <= 0 {
					t.Errorf("bad line %q", l)
				}
				sizes = append(sizes, size)
			}
			want := []int{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
			if !slices.Equal(sizes, want) {
				t.Errorf("sizes %v, want %v:\n%s", sizes, want, out)
			}
		})
	}
}
