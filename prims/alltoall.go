package prims

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// AllToAll sends block j of send to rank j, which receives it as block i
// of its recv (i being this rank): blocks of k = len(send)/Size()
// elements, k the same on every rank. send and recv have the same length,
// a multiple of Size(), and must not overlap.
func AllToAll[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, opts ...Option) (err error) {
	p := c.Size()
	if len(send) != len(recv) || len(send)%p != 0 {
		return argError(c, topo.AllToAll, countError("send has %d elements and recv %d, want equal multiples of %d ranks", len(send), len(recv), p))
	}
	if len(send) > 0 && &send[0] == &recv[0] {
		return argError(c, topo.AllToAll, fmt.Errorf("%w: send and recv are the same buffer", ErrCount))
	}
	kk := len(send) / p
	k, err := start(ctx, c, topo.AllToAll, len(send)*sizeOf[T](), kk == 0 || p == 1, sig[T](-1, ""), opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	r := c.Rank()
	copy(recv[r*kk:(r+1)*kk], send[r*kk:(r+1)*kk])
	if kk == 0 || p == 1 {
		return nil
	}
	switch k.algo {
	case topo.Linear:
		return pairwiseAllToAll(k, send, recv, kk)
	case topo.Shared:
		return sharedAllToAll(k, send, recv, kk)
	}
	return algoError(k.coll, k.algo)
}

// allToAllCost is the cost of an all-to-all of n bytes (one rank's send
// buffer) by algo on the ranks of s.
func allToAllCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	switch algo {
	case topo.Linear:
		return pairwiseAllToAllCost(m, s, n)
	case topo.Shared:
		return sharedAllToAllCost(m, s, n)
	}
	return never
}

// pairwiseAllToAll posts every receive in place and every send from where
// it lies, in the pairwise order (to r+s, from r-s), and waits for all.
func pairwiseAllToAll[T spmd.Number](k *call, send, recv []T, kk int) error {
	cc, ctx := k.cc, k.ctx
	p, r := cc.Size(), cc.Rank()
	t := tag(k.coll, phaseMain)
	reqs := newPending()
	defer reqs.free()
	for s := 1; s < p; s++ {
		from, to := mod(r-s, p), mod(r+s, p)
		reqs.irecv(cc, from, t, spmd.Bytes(recv[from*kk:(from+1)*kk]))
		reqs.isend(ctx, cc, to, t, spmd.Bytes(send[to*kk:(to+1)*kk]))
	}
	return reqs.waitAll(ctx)
}

// pairwiseAllToAllCost is pairwiseAllToAll's: every block posted at once,
// one burst.
func pairwiseAllToAllCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{m.Burst(s, n/float64(s.P), 0), ringMessages(s.P)}
}
