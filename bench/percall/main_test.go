package main

import (
	"os"
	"strings"
	"testing"
)

// TestRun times a few calls of each collective as a single rank (no
// launcher), and refuses bad arguments before it joins a job.
func TestRun(t *testing.T) {
	for _, op := range []string{"allreduce", "allgather"} {
		if err := run(op, "1K", 10, 2, true, false, ""); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		if err := run(op, "1K", 5, 0, true, true, ""); err != nil {
			t.Errorf("%s, the first calls: %v", op, err)
		}
		tr := t.TempDir() + "/r0.trace"
		if err := run(op, "1K", 10, 2, false, false, tr); err != nil {
			t.Errorf("%s, traced: %v", op, err)
		} else if st, err := os.Stat(tr); err != nil || st.Size() == 0 {
			t.Errorf("%s: no trace written to %s (%v)", op, tr, err)
		}
	}
	for _, tc := range []struct {
		op, size    string
		calls, warm int
		want        string
	}{
		{"bcast", "8", 10, 0, `--op "bcast"`},
		{"allreduce", "8x", 10, 0, `--bytes "8x"`},
		{"allreduce", "8", 0, 0, "--calls 0"},
		{"allreduce", "8", 10, -1, "--warmup -1"},
	} {
		err := run(tc.op, tc.size, tc.calls, tc.warm, false, false, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q, %q, %d, %d): %v, want %q", tc.op, tc.size, tc.calls, tc.warm, err, tc.want)
		}
	}
}
