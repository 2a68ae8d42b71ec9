package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Gather collects every rank's send at rank root: rank i's elements land
// in recv[i*k:(i+1)*k], k = len(send), the same on every rank. recv has
// Size()*k elements at the root and is ignored elsewhere; at the root send
// may be recv's own block (in place).
func Gather[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, root int, opts ...Option) (err error) {
	if err := rootError(c, root); err != nil {
		return argError(c, topo.Gather, err)
	}
	kk := len(send)
	if c.Rank() != root {
		recv = nil
	} else if len(recv) != c.Size()*kk {
		return argError(c, topo.Gather, countError("recv has %d elements, want %d ranks x %d", len(recv), c.Size(), kk))
	}
	k, err := start(ctx, c, topo.Gather, c.Size()*kk*sizeOf[T](), kk == 0 || c.Size() == 1, sig[T](root, ""), opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	if kk == 0 || c.Size() == 1 {
		copyIn(recv, send)
		return nil
	}
	switch k.algo {
	case topo.Linear:
		return linearGather(k, send, recv, root)
	case topo.Tree:
		return treeGather(k, send, recv, root)
	case topo.Shared:
		return sharedGather(k, send, recv, root)
	}
	return algoError(k.coll, k.algo)
}

// Scatter hands rank i the block send[i*k:(i+1)*k] of root's send, k =
// len(recv), the same on every rank. send has Size()*k elements at the root
// and is ignored elsewhere; at the root recv may be send's own block.
func Scatter[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, root int, opts ...Option) (err error) {
	if err := rootError(c, root); err != nil {
		return argError(c, topo.Scatter, err)
	}
	kk := len(recv)
	if c.Rank() != root {
		send = nil
	} else if len(send) != c.Size()*kk {
		return argError(c, topo.Scatter, countError("send has %d elements, want %d ranks x %d", len(send), c.Size(), kk))
	}
	k, err := start(ctx, c, topo.Scatter, c.Size()*kk*sizeOf[T](), kk == 0 || c.Size() == 1, sig[T](root, ""), opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	if kk == 0 || c.Size() == 1 {
		copyIn(recv, send)
		return nil
	}
	switch k.algo {
	case topo.Linear:
		return linearScatter(k, send, recv, root)
	case topo.Tree:
		return treeScatter(k, send, recv, root)
	case topo.Shared:
		return sharedScatterBlocks(k, send, recv, root)
	}
	return algoError(k.coll, k.algo)
}

// gatherCost is the cost of a gather of n bytes in p blocks by algo on
// the ranks of s. The root of the linear and the tree gathers copies its
// own block into place besides receiving the others', which it copies
// itself (out of a transport's ring, or out of the senders' memory): on
// one core, one after the other.
func gatherCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	own := n / float64(s.P) * m.Local.Beta
	switch algo {
	case topo.Linear:
		e := linearGatherCost(m, s, n)
		e.rounds += own
		return e
	case topo.Tree:
		e := treeGatherCost(m, s, n)
		e.rounds += own
		return e
	case topo.Shared:
		return sharedGatherCost(m, s, n)
	}
	return never
}

// scatterCost is the cost of a scatter of n bytes in p blocks by algo on
// the ranks of s: a gather's without the root's own block, which it
// copies while the others copy theirs, except where the others copy
// their blocks straight out of the root's memory (topo.Link.Pull): then
// they do so at once, as a linear broadcast's receivers do (pulledCost).
// Priced as p-1 blocks in turn there too, the linear scatter lost to the
// Shared one, whose root writes the whole buffer, at 512 KiB-64 MiB at np
// 4 on 2 cores, where it took 0.3-0.4x the Shared one's time
// (bench/results/choice/shm-h).
func scatterCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	switch algo {
	case topo.Linear:
		if block := n / float64(s.P); s.Hosts == 1 && m.Pulls(false, block) {
			return estimate{pulledCost(m, s, block), float64(s.P - 1)}
		}
		return linearGatherCost(m, s, n)
	case topo.Tree:
		return treeGatherCost(m, s, n)
	case topo.Shared:
		return sharedGatherCost(m, s, n)
	}
	return never
}

// linearGatherCost is linearGather's, or linearScatter's: p-1 blocks
// one after another (gatherCost adds the root's own).
func linearGatherCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{float64(s.P-1) * m.Step(s, s.Hosts > 1, n/float64(s.P), 0, 2, 0), float64(s.P - 1)}
}

// linearGather has the root receive every block in place.
func linearGather[T spmd.Number](k *call, send, recv []T, root int) error {
	cc, ctx := k.cc, k.ctx
	t, kk := tag(k.coll, phaseMain), len(send)
	if cc.Rank() != root {
		return sendTo(ctx, cc, root, t, send)
	}
	reqs := newPending()
	defer reqs.free()
	for r := 0; r < cc.Size(); r++ {
		if r != root {
			reqs.irecv(cc, r, t, spmd.Bytes(recv[r*kk:(r+1)*kk]))
		}
	}
	copyIn(recv[root*kk:(root+1)*kk], send)
	return reqs.waitAll(ctx)
}

// linearScatter has the root send every block from where it lies.
func linearScatter[T spmd.Number](k *call, send, recv []T, root int) error {
	cc, ctx := k.cc, k.ctx
	t, kk := tag(k.coll, phaseMain), len(recv)
	if cc.Rank() != root {
		return recvFrom(ctx, cc, root, t, recv)
	}
	reqs := newPending()
	defer reqs.free()
	for r := 0; r < cc.Size(); r++ {
		if r != root {
			reqs.isend(ctx, cc, r, t, spmd.Bytes(send[r*kk:(r+1)*kk]))
		}
	}
	copyIn(recv, send[root*kk:(root+1)*kk])
	return reqs.waitAll(ctx)
}
