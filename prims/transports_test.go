package prims_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// TestCollectivesOverTransports runs every collective with every algorithm
// over shared memory (one host) and over a mixed job (two hosts: shared
// memory within each, TCP across, so that hierarchical algorithms split
// for real), at 3 and 4 ranks, for counts that leave blocks uneven and a
// count that cuts ring segments, in place and out of place. The full
// matrix of TestCollectives runs over net/mem; this checks that nothing of
// it depends on the transport.
func TestCollectivesOverTransports(t *testing.T) {
	for _, kind := range []spmdtest.Kind{spmdtest.SHM, spmdtest.Mixed} {
		for _, p := range []int{3, 4} {
			for _, coll := range topo.Collectives {
				t.Run(fmt.Sprintf("%s/p=%d/%s", kind, p, coll), func(t *testing.T) {
					var cks []check
					for _, algo := range prims.Algos(coll) {
						for _, n := range []int{0, 1, p + 1, 1000, 3<<16 + 5} {
							cks = append(cks, check{coll, algo, n, false}, check{coll, algo, n, true})
						}
					}
					spmdtest.RunOn(t, kind, p, func(ctx context.Context, w *spmd.World) error {
						for _, k := range cks {
							if err := run[float32](ctx, w.Comm, k); err != nil {
								return err
							}
						}
						return nil
					})
				})
			}
		}
	}
}

// TestSegmentWindowsOverSHM: over shared memory, whose peers copy
// segments straight out of the sender's memory, the ring reduce-scatter
// and Rabenseifner's halving post only a few segments ahead and reuse
// their slots; blocks and halves of more segments than that must still add
// up, for every collective built on them, with and without a fold. The
// ring all-gather forwards blocks of several segments, and with two ranks
// sends each whole, after posting its receives.
func TestSegmentWindowsOverSHM(t *testing.T) {
	for _, p := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			seg := prims.SegmentBytes / 4 // float32 elements
			n := p*(3*seg+seg/3) + 7      // blocks of 3 1/3 segments and a ragged end
			spmdtest.RunOn(t, spmdtest.SHM, p, func(ctx context.Context, w *spmd.World) error {
				for _, k := range []check{
					{topo.AllReduce, topo.Ring, n, true},
					{topo.ReduceScatter, topo.Ring, n, false},
					{topo.Reduce, topo.Ring, n, false},
					{topo.AllReduce, topo.Rabenseifner, n, true},
					{topo.AllReduce, topo.Rabenseifner, n, false},
					{topo.ReduceScatter, topo.Rabenseifner, n, false},
					{topo.Reduce, topo.Rabenseifner, n, false},
					{topo.AllGather, topo.Ring, n, false},
					{topo.AllGather, topo.Ring, n, true},
				} {
					if err := run[float32](ctx, w.Comm, k); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}
