package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Reduce reduces every rank's send with op into recv at rank root. recv
// has send's length at the root and is ignored elsewhere (it may be nil);
// at the root send may be recv (in place). send is never modified
// otherwise.
func Reduce[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, op Op[T], root int, opts ...Option) (err error) {
	if err := op.valid(); err != nil {
		return argError(c, topo.Reduce, err)
	}
	if err := rootError(c, root); err != nil {
		return argError(c, topo.Reduce, err)
	}
	if c.Rank() != root {
		recv = nil
	} else if len(send) != len(recv) {
		return argError(c, topo.Reduce, countError("send has %d elements, recv %d", len(send), len(recv)))
	}
	n := len(send)
	k, err := start(ctx, c, topo.Reduce, n*sizeOf[T](), n == 0 || c.Size() == 1, sig[T](root, op.name), opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	return reduce(k, send, recv, root, op)
}

// reduce runs k's algorithm. dst is the result at the root; elsewhere it
// is a work buffer of src's length the algorithm may use (it may be src),
// or nil.
func reduce[T spmd.Number](k *call, src, dst []T, root int, op Op[T]) error {
	if len(src) == 0 || k.cc.Size() == 1 {
		copyIn(dst, src)
		return nil
	}
	switch k.algo {
	case topo.Tree:
		return treeReduce(k, src, dst, root, op)
	case topo.Linear:
		return linearReduce(k, src, dst, root, op)
	case topo.Ring:
		return ringReduce(k, src, dst, root, op)
	case topo.Rabenseifner:
		return rabenseifnerReduce(k, src, dst, root, op)
	case topo.Hierarchical:
		return hierReduce(k, src, dst, root, op)
	case topo.Shared:
		return sharedReduce(k, src, dst, root, op)
	}
	return algoError(k.coll, k.algo)
}

// reduceCost is the cost of a reduce of n bytes by algo on the ranks of s.
// The work copy that the ring and Rabenseifner reduce into is left out
// (the hierarchical all-reduce's choice rests on that).
func reduceCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	switch algo {
	case topo.Tree:
		return treeReduceCost(m, s, n)
	case topo.Linear:
		return linearReduceCost(m, s, n)
	case topo.Ring:
		return ringReduceCost(m, s, n)
	case topo.Rabenseifner:
		return rabenseifnerReduceCost(m, s, n)
	case topo.Hierarchical:
		return hierReduceCost(m, s, n)
	case topo.Shared:
		return sharedReduceCost(m, s, n)
	}
	return never
}

// linearReduce has the root receive and reduce every rank's vector in turn.
func linearReduce[T spmd.Number](k *call, src, dst []T, root int, op Op[T]) error {
	cc, ctx := k.cc, k.ctx
	t := tag(k.coll, phaseMain)
	if cc.Rank() != root {
		return sendTo(ctx, cc, root, t, src)
	}
	copyIn(dst, src)
	tmp := borrow[T](k, len(src))
	for r := 0; r < cc.Size(); r++ {
		if r == root {
			continue
		}
		if err := recvFrom(ctx, cc, r, t, tmp); err != nil {
			return err
		}
		op.reduce(dst, tmp)
	}
	return nil
}

// linearReduceCost is linearReduce's: p-1 messages one after another,
// each reduced by the root.
func linearReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{float64(s.P-1) * m.Step(s, s.Hosts > 1, n, n, 2, 1), float64(s.P - 1)}
}

// workFor returns the buffer a reduction works in: dst, or a borrowed one,
// holding a copy of src.
func workFor[T spmd.Number](k *call, src, dst []T) []T {
	if dst == nil {
		dst = borrow[T](k, len(src))
	}
	copyIn(dst, src)
	return dst
}

// ringReduce is a ring reduce-scatter, then every rank sends the block it
// reduced straight into the root's result.
func ringReduce[T spmd.Number](k *call, src, dst []T, root int, op Op[T]) error {
	p := k.cc.Size()
	work := workFor(k, src, dst)
	b := k.bounds(len(src), p)
	if err := ringReduceScatter(k, work, b, k.cc.Rank(), op, tag(k.coll, phaseMain)); err != nil {
		return err
	}
	return gatherBlocks(k, work, b, root, func(r int) int { return r })
}

// ringReduceCost is ringReduce's: the ring reduce-scatter, then every
// block to the root, as the linear gather sends them.
func ringReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{ringCost(m, s, n/float64(s.P), n/float64(s.P)) + linearGatherCost(m, s, n).rounds, ringMessages(s.P) + float64(s.P-1)}
}

// rabenseifnerReduce is a recursive-halving reduce-scatter, then every
// rank of the core sends its block straight into the root's result.
func rabenseifnerReduce[T spmd.Number](k *call, src, dst []T, root int, op Op[T]) error {
	f := newFold(k.cc.Size(), k.cc.Rank())
	work, tmp := dst, []T(nil)
	if work == nil {
		scr := borrow[T](k, 2*len(src))
		work, tmp = scr[:len(src)], scr[len(src):]
	} else {
		tmp = borrow[T](k, len(src))
	}
	copyIn(work, src)
	if err := foldIn(k, f, work, tmp, op); err != nil {
		return err
	}
	sb := k.bounds(len(src), f.pp)
	if !f.out() {
		if err := halve(k, f, work, tmp, sb, op); err != nil {
			return err
		}
	}
	// Block v of sb is held by rank f.real(v); the extras hold none.
	holder := func(v int) int { return f.real(v) }
	return gatherBlocks(k, work, sb, root, holder)
}

// rabenseifnerReduceCost is rabenseifnerReduce's: the fold in (its round
// back saved), halving, then the blocks to the root, modelled as a
// binomial gather of the core's blocks. Where p is a power of two there
// is no fold, and no round back to save: taking its alpha off there too
// made Rabenseifner the model's reduce at every size on 2 ranks of a
// 16-core VM, 3-4x slower than tree or linear up to 8 KiB (gorun --tune,
// bench/results/manycore-tune.txt).
func rabenseifnerReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	p, q := float64(s.P), pow2(s.P)
	fold := 0.0
	if s.P != q {
		fold = foldCost(m, s, n, 0, true) - m.Alpha(s, s.Hosts > 1)
	}
	return estimate{fold + halvingCost(m, s, n, true) +
		binomialCost(m, s, func(d int) float64 { return n * min(float64(d), p/2) / p }, false),
		doublingMessages(s.P) + float64(q-1) + float64(s.P-q)}
}

// gatherBlocks sends block v of b, held by rank holder(v), to root, which
// receives them in place into buf.
func gatherBlocks[T spmd.Number](k *call, buf []T, b []int, root int, holder func(v int) int) error {
	cc, ctx := k.cc, k.ctx
	t := tag(k.coll, phaseGather)
	reqs := newPending()
	defer reqs.free()
	for v := 0; v+1 < len(b); v++ {
		h := holder(v)
		switch {
		case h == root && cc.Rank() == root:
		case cc.Rank() == root:
			reqs.irecv(cc, h, t, spmd.Bytes(buf[b[v]:b[v+1]]))
		case cc.Rank() == h:
			reqs.isend(ctx, cc, root, t, spmd.Bytes(buf[b[v]:b[v+1]]))
		}
	}
	return reqs.waitAll(ctx)
}
