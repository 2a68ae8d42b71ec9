package topo

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// TestSharedCandidate: ranks of one host joined by memory they share
// share it (Layout.Shared), so that the Shared algorithms are candidates,
// chosen for a barrier and an 8-byte all-reduce when every rank has a
// core, where one wait in memory beats any message; and the report says
// so. Joined by TCP, or on two hosts, they do not, and the report says
// that too, of one host, where collectives then cost several times what
// they would.
func TestSharedCandidate(t *testing.T) {
	tests := []struct {
		kind   spmdtest.Kind
		p      int
		shared bool
		say    string // what the report says of shared memory, if anything
	}{
		{spmdtest.SHM, 2, true, "shared memory: yes"},
		{spmdtest.Mem, 2, true, "shared memory: yes"},
		{spmdtest.SHM, 3, true, "shared memory: yes"},
		{spmdtest.TCP, 2, false, "shared memory: no, the ranks' transport maps none"},
		{spmdtest.Mixed, 4, false, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/p=%d", tt.kind, tt.p), func(t *testing.T) {
			out := make([]bytes.Buffer, tt.p)
			spmdtest.RunOn(t, tt.kind, tt.p, func(ctx context.Context, w *spmd.World) error {
				if got := LayoutOf(w.Comm).Shared; got != tt.shared {
					return fmt.Errorf("Layout.Shared = %v, want %v", got, tt.shared)
				}
				for _, coll := range []Collective{Barrier, AllReduce} {
					a, err := Choose(ctx, w.Comm, coll, 8)
					if err != nil {
						return err
					}
					if a == Shared && !tt.shared || a != Shared && tt.shared && tt.p <= runtime.NumCPU() {
						return fmt.Errorf("Choose(%s, 8 B) = %s, with Layout.Shared %v", coll, a, tt.shared)
					}
				}
				return Report(ctx, w, &out[w.Rank()])
			})
			switch got := out[0].String(); {
			case tt.say == "" && strings.Contains(got, "shared memory"):
				t.Errorf("the report speaks of shared memory on several hosts:\n%s", got)
			case !strings.Contains(got, tt.say):
				t.Errorf("the report does not say %q:\n%s", tt.say, got)
			}
		})
	}
}
