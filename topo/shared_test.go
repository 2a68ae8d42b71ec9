package topo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// TestLayoutShared: ranks of one host joined by memory they share share it
// (Layout.Shared), so that the Shared algorithms are candidates
// (prims.TestSharedCandidate says they are chosen), and Describe says so.
// Joined by TCP, or on two hosts, they do not, and Describe says that too,
// of one host, where collectives then cost several times what they would.
func TestLayoutShared(t *testing.T) {
	tests := []struct {
		kind   spmdtest.Kind
		p      int
		shared bool
		say    string // what the description says of shared memory, if anything
	}{
		{spmdtest.SHM, 2, true, "shared memory: yes"},
		{spmdtest.Mem, 2, true, "shared memory: yes"},
		{spmdtest.SHM, 3, true, "shared memory: yes"},
		{spmdtest.TCP, 2, false, "shared memory: no, the ranks' transport maps none"},
		{spmdtest.Mixed, 4, false, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/p=%d", tt.kind, tt.p), func(t *testing.T) {
			var out strings.Builder
			spmdtest.RunOn(t, tt.kind, tt.p, func(ctx context.Context, w *spmd.World) error {
				lay := LayoutOf(w.Comm)
				if lay.Shared != tt.shared {
					return fmt.Errorf("Layout.Shared = %v, want %v", lay.Shared, tt.shared)
				}
				if w.Rank() != 0 {
					return nil
				}
				return Describe(&out, DefaultModel(), lay)
			})
			switch got := out.String(); {
			case tt.say == "" && strings.Contains(got, "shared memory"):
				t.Errorf("the description speaks of shared memory on several hosts:\n%s", got)
			case !strings.Contains(got, tt.say):
				t.Errorf("the description does not say %q:\n%s", tt.say, got)
			}
		})
	}
}
