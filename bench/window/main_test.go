package main

import (
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"
)

// TestRun runs a few exchanges as a single rank (no launcher: there is no
// other rank to exchange with, so it times the bookkeeping), and refuses
// bad arguments before it joins a job.
func TestRun(t *testing.T) {
	if err := run(4, "8", 3, 1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		window          int
		size            string
		exchanges, warm int
		want            string
	}{
		{0, "8", 1, 0, "--window 0"},
		{1, "8x", 1, 0, `--bytes "8x"`},
		{1, "8", 0, 0, "--exchanges 0"},
		{1, "8", 1, -1, "--warmup -1"},
	} {
		err := run(tc.window, tc.size, tc.exchanges, tc.warm)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%d, %q, %d, %d): %v, want %q", tc.window, tc.size, tc.exchanges, tc.warm, err, tc.want)
		}
	}
}

// TestProcesses runs the exchanges under gorun on 3 ranks, where each
// rank's window goes to two others.
func TestProcesses(t *testing.T) {
	bins := proctest.Build(t, "../../cmd/gorun", ".")
	args := []string{"--window", "8", "--bytes", "1KiB", "--exchanges", "20", "--warmup", "2"}
	out, stderr, err := proctest.Run(bins[0], bins[1], 3, args...)
	if err != nil {
		t.Fatalf("gorun -np 3 window %v: %v\n%s%s", args, err, out, stderr)
	}
	if !strings.HasPrefix(out, "np 3 window 8 x 1024 B: ") || !strings.HasSuffix(out, " us an exchange\n") {
		t.Errorf("output %q", out)
	}
}
