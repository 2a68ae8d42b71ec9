package topo

import (
	"context"
	"fmt"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// TestChooseAgrees checks that every rank gets the same algorithm for the
// same call, and that GORUN_ALGO overrides the model.
func TestChooseAgrees(t *testing.T) {
	const n = 4
	sizes := []int{8, 4 << 10, 1 << 20, 64 << 20}
	got := make([][]Algo, n)
	spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
		for _, coll := range Collectives {
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
		if a, err := Choose(ctx, w.Comm, AllReduce, 1<<20); a != Tree || err != nil {
			return fmt.Errorf("Choose(allreduce) with GORUN_ALGO=tree = %q, %v", a, err)
		}
		if _, err := Choose(ctx, w.Comm, AllToAll, 1<<20); err == nil {
			return fmt.Errorf("Choose(alltoall) with GORUN_ALGO=tree succeeded")
		}
		return nil
	})
}
