package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// AllReduce reduces buf across the ranks of c with op, in place: on return
// every rank's buf holds the same reduction of all ranks' bufs. Every rank
// passes the same length.
func AllReduce[T spmd.Number](ctx context.Context, c *spmd.Comm, buf []T, op Op[T], opts ...Option) error {
	return AllReduceTo(ctx, c, buf, buf, op, opts...)
}

// AllReduceTo is AllReduce out of place: it leaves send alone and writes
// the reduction to recv, which has send's length. Passing the same slice
// as both is AllReduce.
func AllReduceTo[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, op Op[T], opts ...Option) (err error) {
	if err := op.valid(); err != nil {
		return argError(c, topo.AllReduce, err)
	}
	if len(send) != len(recv) {
		return argError(c, topo.AllReduce, countError("send has %d elements, recv %d", len(send), len(recv)))
	}
	n := len(recv)
	k, err := start(ctx, c, topo.AllReduce, n*sizeOf[T](), n == 0 || c.Size() == 1, opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	copyIn(recv, send)
	return allReduce(k, recv, op)
}

// allReduce reduces buf in place with k's algorithm.
func allReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	if len(buf) == 0 || k.cc.Size() == 1 {
		return nil
	}
	switch k.algo {
	case topo.Ring:
		return ringAllReduce(k, buf, op)
	case topo.Tree:
		if err := treeReduce(k, buf, buf, 0, op); err != nil {
			return err
		}
		return treeBcast(k, buf, 0, phaseBcast)
	case topo.RecursiveDoubling:
		return recdblAllReduce(k, buf, op)
	case topo.Rabenseifner:
		return rabenseifnerAllReduce(k, buf, op)
	case topo.Hierarchical:
		return hierAllReduce(k, buf, op)
	case topo.Shared:
		return sharedAllReduce(k, buf, op)
	}
	return algoError(k.coll, k.algo)
}

// ringAllReduce is a segmented ring reduce-scatter followed by a ring
// allgather: 2(p-1) steps each moving n/p elements per rank.
func ringAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	p := k.cc.Size()
	b := bounds(len(buf), p)
	own := mod(k.cc.Rank()+1, p)
	if err := ringReduceScatter(k, buf, b, own, op, tag(k.coll, phaseMain)); err != nil {
		return err
	}
	return ringAllGather(k, buf, b, own, tag(k.coll, phaseGather))
}

// recdblAllReduce swaps the whole vector with partners at distance 1, 2,
// 4, ...: lg p steps of n elements, best for small vectors.
func recdblAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	f := newFold(k.cc.Size(), k.cc.Rank())
	tmp := borrow[T](k, len(buf))
	if err := foldIn(k, f, buf, tmp, op); err != nil {
		return err
	}
	if !f.out() {
		for step, mask := 0, 1; mask < f.pp; step, mask = step+1, mask*2 {
			peer := f.real(f.vrank ^ mask)
			if err := exchange(k.ctx, k.cc, buf, peer, tmp, peer, tag(k.coll, phaseStep+step)); err != nil {
				return err
			}
			op.reduce(buf, tmp)
		}
	}
	return foldOut(k, f, buf)
}

// rabenseifnerAllReduce is a recursive-halving reduce-scatter followed by
// a recursive-doubling allgather: 2 lg p steps moving 2n(p-1)/p elements.
func rabenseifnerAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	f := newFold(k.cc.Size(), k.cc.Rank())
	tmp := borrow[T](k, len(buf))
	if err := foldIn(k, f, buf, tmp, op); err != nil {
		return err
	}
	if !f.out() {
		sb := bounds(len(buf), f.pp)
		if err := halve(k, f, buf, tmp, sb, op); err != nil {
			return err
		}
		if err := double(k, f, buf, sb, phaseDouble); err != nil {
			return err
		}
	}
	return foldOut(k, f, buf)
}
