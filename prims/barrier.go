package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Barrier returns once every rank of c has entered it.
func Barrier(ctx context.Context, c *spmd.Comm, opts ...Option) (err error) {
	k, err := start(ctx, c, topo.Barrier, 0, c.Size() == 1, signature{root: -1}, opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	if c.Size() == 1 {
		return nil
	}
	switch k.algo {
	case topo.RecursiveDoubling:
		return dissemination(k)
	case topo.Tree:
		// Empty messages up a binomial tree to rank 0 and back down.
		var none []byte
		if err := treeReduce(k, none, none, 0, Op[byte]{"none", func(_, _ []byte) {}}); err != nil {
			return err
		}
		return treeBcast(k, none, 0, phaseBcast)
	case topo.Shared:
		return sharedBarrier(k)
	}
	return algoError(k.coll, k.algo)
}

// barrierCost is the cost of a barrier by algo on the ranks of s: the
// tree's empty messages up and down, dissemination's ceil(lg p) rounds of
// p messages (priced as a tree's rounds).
func barrierCost(m topo.Model, algo topo.Algo, s topo.Shape) estimate {
	switch algo {
	case topo.RecursiveDoubling:
		return estimate{treeLatencyCost(m, s), float64(s.P * lg(s.P))}
	case topo.Tree:
		return estimate{2 * treeLatencyCost(m, s), float64(2 * (s.P - 1))}
	case topo.Shared:
		return sharedBarrierCost(m, s)
	}
	return never
}

// dissemination runs ceil(lg p) rounds; in round i each rank signals the
// rank 2^i after it and waits for the one 2^i before it.
func dissemination(k *call) error {
	cc := k.cc
	p, r := cc.Size(), cc.Rank()
	for step, d := 0, 1; d < p; step, d = step+1, d*2 {
		t := tag(k.coll, phaseStep+step)
		if _, err := cc.Sendrecv(k.ctx, nil, mod(r+d, p), t, nil, mod(r-d, p), t); err != nil {
			return err
		}
	}
	return nil
}
