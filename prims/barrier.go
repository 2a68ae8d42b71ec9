package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Barrier returns once every rank of c has entered it.
func Barrier(ctx context.Context, c *spmd.Comm, opts ...Option) (err error) {
	k, err := start(ctx, c, topo.Barrier, 0, c.Size() == 1, opts)
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
