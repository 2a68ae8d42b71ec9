package workload

import (
	"context"
	"flag"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// flagsOf parses args with the training flags and returns FlagValues.
func flagsOf(t *testing.T, args ...string) []string {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c := DefaultConfig()
	c.Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return FlagValues(fs)
}

// TestAgreeFlags: ranks with the same program and flags (however spelt)
// agree; another flag or program fails every rank with one message
// naming the first rank and flag that differ.
func TestAgreeFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		progs []string
		args  [][]string
		want  string // "" for agreement
	}{
		{"same", []string{"zero", "zero", "zero"}, [][]string{{"--lr", "0.10"}, {"--lr", "0.1"}, {"--lr=0.1"}}, ""},
		{"another flag", []string{"zero", "zero", "zero"}, [][]string{{"--steps", "3"}, {"--steps", "3"}, {"--steps", "4", "--lr", "1"}},
			"rank 2 runs with --lr=1 but rank 0 with --lr=0.05: give every rank of the job the same flags"},
		{"another program", []string{"ddp", "zero"}, [][]string{nil, nil},
			"rank 1 runs zero but rank 0 ddp: run one program, with the same flags, on every rank of the job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			errs := map[int]string{}
			spmdtest.Run(t, len(tc.progs), func(ctx context.Context, w *spmd.World) error {
				err := AgreeFlags(ctx, w.Comm, tc.progs[w.Rank()], flagsOf(t, tc.args[w.Rank()]...))
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs[w.Rank()] = err.Error()
				}
				return nil
			})
			for r := range tc.progs {
				if got := errs[r]; tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
					t.Errorf("rank %d: %q, want %q", r, got, tc.want)
				}
			}
		})
	}
}
