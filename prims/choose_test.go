package prims

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

func TestAlgos(t *testing.T) {
	for _, c := range topo.Collectives {
		if len(Algos(c)) == 0 {
			t.Errorf("%s has no algorithms", c)
		}
		for _, a := range Algos(c) {
			if _, err := topo.ParseAlgo(string(a)); err != nil {
				t.Errorf("%s: %v", c, err)
			}
		}
	}
}

// TestChooseAgrees checks that every rank gets the same algorithm for the
// same call, and that GORUN_ALGO overrides the model.
func TestChooseAgrees(t *testing.T) {
	const n = 4
	sizes := []int{8, 4 << 10, 1 << 20, 64 << 20}
	got := make([][]topo.Algo, n)
	spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
		for _, coll := range topo.Collectives {
			for _, b := range sizes {
				a, err := Choose(ctx, w.Comm, coll, b)
				if err != nil {
					return err
				}
				if !Applies(coll, a) {
					return fmt.Errorf("Choose(%s, %d) = %s, which does not apply", coll, b, a)
				}
				got[w.Rank()] = append(got[w.Rank()], a)
			}
		}
		return nil
	})
	for r := 1; r < n; r++ {
		if fmt.Sprint(got[r]) != fmt.Sprint(got[0]) {
			t.Errorf("rank %d chose %v, rank 0 %v", r, got[r], got[0])
		}
	}
}

func TestChooseForced(t *testing.T) {
	t.Setenv(contract.EnvAlgo, "tree")
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		if a, err := Choose(ctx, w.Comm, topo.AllReduce, 1<<20); a != topo.Tree || err != nil {
			return fmt.Errorf("Choose(allreduce) with GORUN_ALGO=tree = %q, %v", a, err)
		}
		if _, err := Choose(ctx, w.Comm, topo.AllToAll, 1<<20); err == nil {
			return fmt.Errorf("Choose(alltoall) with GORUN_ALGO=tree succeeded")
		}
		return nil
	})
}

func TestForced(t *testing.T) {
	tests := []struct {
		name, env string
		coll      topo.Collective
		want      topo.Algo
		err       string
	}{
		{"unset", "", topo.AllReduce, "", ""},
		{"one for all", "ring", topo.AllReduce, topo.Ring, ""},
		{"not applicable", "ring", topo.Barrier, "", "ring does not implement barrier; for barrier use one of recdbl, tree"},
		{"unknown", "fast", topo.AllReduce, "", `unknown algorithm "fast"`},
		{"pairs, this one", "allreduce=tree,broadcast=ring", topo.Broadcast, topo.Ring, ""},
		{"pairs, other one", "allreduce=tree", topo.Broadcast, "", ""},
		{"pairs, bad collective", "allreduc=tree", topo.AllReduce, "", `unknown collective "allreduc"`},
		{"pairs, bad pair", "allreduce=tree,ring", topo.AllReduce, "", `"ring" is not collective=algorithm`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseForced(tt.env, tt.coll)
			if got != tt.want {
				t.Errorf("parseForced(%q, %s) = %q, want %q", tt.env, tt.coll, got, tt.want)
			}
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseForced(%q, %s) error %v, want one containing %q", tt.env, tt.coll, err, tt.err)
			}
		})
	}
}
