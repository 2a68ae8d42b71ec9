package prims_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/topo"
)

// opsOf returns the built-in ops and a user-supplied one for T.
func opsOf[T spmd.Number]() []prims.Op[T] {
	userSum := prims.OpFunc(func(dst, src []T) {
		for i := range dst {
			dst[i] += src[i]
		}
	})
	return []prims.Op[T]{prims.Sum[T](), prims.Prod[T](), prims.Max[T](), prims.Min[T](), userSum}
}

// TestOps runs every op through every algorithm of the reductions.
func TestOps(t *testing.T) {
	for _, coll := range []topo.Collective{topo.AllReduce, topo.Reduce, topo.ReduceScatter} {
		for _, algo := range prims.Algos(coll) {
			for _, p := range []int{3, 4, 7} {
				t.Run(fmt.Sprintf("%s/%s/p=%d", coll, algo, p), func(t *testing.T) {
					t.Parallel()
					t.Run("int32", func(t *testing.T) { runOps[int32](t, coll, algo, p) })
					t.Run("float64", func(t *testing.T) { runOps[float64](t, coll, algo, p) })
					t.Run("uint8", func(t *testing.T) { runOps[uint8](t, coll, algo, p) })
				})
			}
		}
	}
}

func runOps[T spmd.Number](t *testing.T, coll topo.Collective, algo topo.Algo, p int) {
	spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
		for _, op := range opsOf[T]() {
			for _, n := range []int{1, 5, 1000} {
				k := check{coll, algo, n, n == 5}
				var err error
				switch coll {
				case topo.AllReduce:
					err = checkAllReduce(ctx, w.Comm, k, op)
				case topo.Reduce:
					err = checkReduce(ctx, w.Comm, k, op)
				case topo.ReduceScatter:
					err = checkReduceScatter(ctx, w.Comm, k, op)
				}
				if err != nil {
					return fmt.Errorf("%s %v: %w", op.Name(), k, err)
				}
			}
		}
		return nil
	})
}

// TestMaxNaN checks that a NaN wins a max from either side, so that every
// rank of recursive doubling ends with the same bits.
func TestMaxNaN(t *testing.T) {
	spmdtest.Run(t, 4, func(ctx context.Context, w *spmd.World) error {
		buf := []float64{float64(w.Rank()), 1}
		if w.Rank() == 2 {
			buf[0] = math.NaN()
		}
		if err := prims.AllReduce(ctx, w.Comm, buf, prims.Max[float64](), prims.WithAlgo(topo.RecursiveDoubling)); err != nil {
			return err
		}
		if !math.IsNaN(buf[0]) || buf[1] != 1 {
			return fmt.Errorf("got %v, want [NaN 1]", buf)
		}
		return nil
	})
}

// TestBadArguments checks the errors of calls that cannot run: they name
// the collective and the communicator, wrap a sentinel, and send nothing.
func TestBadArguments(t *testing.T) {
	spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
		c, buf := w.Comm, make([]float32, 6)
		cases := []struct {
			name string
			err  error
			want error
		}{
			{"ring gather", prims.Gather(ctx, c, buf[:2], buf, 0, prims.WithAlgo(topo.Ring)), prims.ErrAlgo},
			{"ring alltoall", prims.AllToAll(ctx, c, buf, make([]float32, 6), prims.WithAlgo(topo.Ring)), prims.ErrAlgo},
			{"zero op", prims.AllReduce(ctx, c, buf, prims.Op[float32]{}), prims.ErrOp},
			{"short recv", prims.AllReduceTo(ctx, c, buf, buf[:5], prims.Sum[float32]()), prims.ErrCount},
			{"gather recv", prims.Gather(ctx, c, buf, make([]float32, 17), c.Rank()), prims.ErrCount},
			{"reducescatter recv", prims.ReduceScatter(ctx, c, buf, buf[:1], prims.Sum[float32]()), prims.ErrCount},
			{"alltoall uneven", prims.AllToAll(ctx, c, buf[:5], make([]float32, 5)), prims.ErrCount},
			{"alltoall in place", prims.AllToAll(ctx, c, buf, buf), prims.ErrCount},
			{"root", prims.Broadcast(ctx, c, buf, 3), spmd.ErrBadRank},
		}
		for _, tc := range cases {
			if !errors.Is(tc.err, tc.want) {
				return fmt.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
			}
			if want := fmt.Sprintf("on comm %d", c.ID()); !strings.Contains(tc.err.Error(), want) {
				return fmt.Errorf("%s: %q does not say %q", tc.name, tc.err, want)
			}
		}
		// The communicator still works.
		return checkAllReduce(ctx, c, check{topo.AllReduce, topo.Ring, 6, true}, prims.Sum[float32]())
	})
}
