package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"
)

// TestProcesses runs collbench under gorun on 2, 3 and 4 ranks of this
// host with its reference check, every collective with the algorithms topo
// chooses and the shared ones forced: real processes over shared memory,
// where the in-process tests map one file several times in one process.
func TestProcesses(t *testing.T) {
	bins := proctest.Build(t, "../../cmd/gorun", ".")
	gorunBin, benchBin := bins[0], bins[1]
	runs := []struct {
		extra []string
		algos []string // the algorithms the lines may name; nil: any
		lines int      // lines per size and op
	}{
		{[]string{"--op", "all"}, nil, 1},
		{[]string{"--op", "allreduce,broadcast,allgather", "--algo", "shared"}, []string{"shared"}, 1},
		{[]string{"--op", "allreduce", "--algo", "shared", "--type", "int64", "--redop", "max"}, []string{"shared"}, 1},
		// A list of algorithms, taking turns over two rounds.
		{[]string{"--op", "allreduce,allgather", "--algo", "ring,shared,auto", "-r", "2"}, nil, 3},
	}
	const sizes = 4 // -b 8 -e 1M -f 32: 8 B, 256 B, 8 KiB, 256 KiB
	for _, np := range []int{2, 3, 4} {
		for _, run := range runs {
			extra := run.extra
			args := append([]string{"-np", fmt.Sprint(np), "--timeout", "2m", benchBin,
				"-c", "1", "-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"}, extra...)
			t.Run(fmt.Sprintf("np=%d/%s", np, strings.Join(extra, " ")), func(t *testing.T) {
				cmd := exec.Command(gorunBin, args...)
				cmd.WaitDelay = 10 * time.Second
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("gorun %v: %v\n%s%s", args, err, out, stderr.String())
				}
				rows := 0
				for _, l := range strings.Split(string(out), "\n") {
					f := strings.Fields(l)
					if len(f) != 11 || !slices.Contains(opNames, f[0]) {
						continue
					}
					rows++
					if f[10] != "0" {
						t.Errorf("wrong elements: %s", l)
					}
					if run.algos != nil && !slices.Contains(run.algos, f[6]) {
						t.Errorf("ran %s, want one of %v: %s", f[6], run.algos, l)
					}
				}
				if rows == 0 {
					t.Fatalf("no results:\n%s", out)
				}
				if len(extra) > 2 && rows != sizes*len(strings.Split(extra[1], ","))*run.lines {
					t.Errorf("%d result lines, want %d per size and op:\n%s", rows, run.lines, out)
				}
			})
		}
	}
}
