package main

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/examples/internal/proctest"
)

// TestProcesses runs pingpong under gorun on 2 ranks, in both modes, and
// checks that it prints a positive time for every size from 0 to -max.
func TestProcesses(t *testing.T) {
	bins := proctest.Build(t, "../../cmd/gorun", ".")
	gorunBin, bin := bins[0], bins[1]
	for _, mode := range [][]string{nil, {"-stream"}} {
		t.Run(strings.Join(append([]string{"mode"}, mode...), " "), func(t *testing.T) {
			args := append([]string{"-np", "2", "--timeout", "2m", bin, "-max", "1KiB", "-iters", "50", "-warmup", "5"}, mode...)
			cmd := exec.Command(gorunBin, args...)
			cmd.WaitDelay = 10 * time.Second
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("gorun %v: %v\n%s%s", args, err, out, stderr.String())
			}
			var sizes []int
			for _, l := range strings.Split(string(out), "\n") {
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
