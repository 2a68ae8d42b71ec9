package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Broadcast copies root's buf into every other rank's buf. Every rank
// passes the same length.
func Broadcast[T spmd.Number](ctx context.Context, c *spmd.Comm, buf []T, root int, opts ...Option) (err error) {
	if err := rootError(c, root); err != nil {
		return argError(c, topo.Broadcast, err)
	}
	n := len(buf)
	k, err := start(ctx, c, topo.Broadcast, n*sizeOf[T](), n == 0 || c.Size() == 1, opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	return broadcast(k, buf, root)
}

func broadcast[T spmd.Number](k *call, buf []T, root int) error {
	if len(buf) == 0 || k.cc.Size() == 1 {
		return nil
	}
	switch k.algo {
	case topo.Tree:
		return treeBcast(k, buf, root, phaseMain)
	case topo.Ring:
		return chainBcast(k, buf, root)
	case topo.Linear:
		return linearBcast(k, buf, root)
	case topo.Hierarchical:
		return hierBcast(k, buf, root)
	case topo.Shared:
		return sharedBcast(k, buf, root)
	}
	return algoError(k.coll, k.algo)
}

// chainBcast pipelines buf down the chain root, root+1, ..., root-1 in
// segments: each rank forwards a segment as soon as it has it, so a large
// vector takes about n/bandwidth plus p segment times.
func chainBcast[T spmd.Number](k *call, buf []T, root int) error {
	cc, ctx := k.cc, k.ctx
	p := cc.Size()
	vr := mod(cc.Rank()-root, p)
	next, prev := mod(cc.Rank()+1, p), mod(cc.Rank()-1, p)
	t := tag(k.coll, phaseMain)
	seg := segElems[T]()
	sends, recvs := newPending(), newPending()
	defer sends.free()
	defer recvs.free()
	for lo := 0; lo < len(buf); lo += seg {
		piece := spmd.Bytes(buf[lo:min(lo+seg, len(buf))])
		if vr == 0 {
			sends.isend(ctx, cc, next, t, piece)
		} else {
			recvs.irecv(cc, prev, t, piece)
		}
	}
	for i := range recvs.reqs {
		if err := recvs.wait(ctx, i); err != nil {
			return err
		}
		if vr < p-1 {
			lo := i * seg
			sends.isend(ctx, cc, next, t, spmd.Bytes(buf[lo:min(lo+seg, len(buf))]))
		}
	}
	recvs.reset()
	return sends.waitAll(ctx)
}

// linearBcast has the root send buf to every rank.
func linearBcast[T spmd.Number](k *call, buf []T, root int) error {
	cc, ctx := k.cc, k.ctx
	t := tag(k.coll, phaseMain)
	if cc.Rank() != root {
		return recvFrom(ctx, cc, root, t, buf)
	}
	sends := newPending()
	defer sends.free()
	for r := 0; r < cc.Size(); r++ {
		if r != root {
			sends.isend(ctx, cc, r, t, spmd.Bytes(buf))
		}
	}
	return sends.waitAll(ctx)
}
