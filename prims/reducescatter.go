package prims

import (
	"context"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// ReduceScatter reduces every rank's send with op and leaves block r of
// the result, as Block(len(send), Size(), r) cuts it, in rank r's recv.
// Every rank passes the same len(send); recv has its block's length and
// may be send's own block. send is otherwise left alone.
func ReduceScatter[T spmd.Number](ctx context.Context, c *spmd.Comm, send, recv []T, op Op[T], opts ...Option) (err error) {
	if err := op.valid(); err != nil {
		return argError(c, topo.ReduceScatter, err)
	}
	n, p, r := len(send), c.Size(), c.Rank()
	lo, hi := Block(n, p, r)
	if len(recv) != hi-lo {
		return argError(c, topo.ReduceScatter, countError("recv has %d elements, want %d: block %d of %d elements cut %d ways", len(recv), hi-lo, r, n, p))
	}
	k, err := start(ctx, c, topo.ReduceScatter, n*sizeOf[T](), n == 0 || p == 1, sig[T](-1, op.name), opts)
	if err != nil {
		return err
	}
	defer k.end(&err)
	if n == 0 || p == 1 {
		copyIn(recv, send)
		return nil
	}
	b := k.bounds(n, p)
	switch k.algo {
	case topo.Ring:
		return ringReduceScatterTo(k, send, recv, b, op)
	case topo.Rabenseifner:
		return rabenseifnerReduceScatter(k, send, recv, b, op)
	case topo.Linear:
		return linearReduceScatter(k, send, recv, b, op)
	case topo.Shared:
		return sharedReduceScatter(k, send, recv, b, op)
	}
	return algoError(k.coll, k.algo)
}

// reduceScatterCost is the cost of a reduce-scatter of n bytes (the whole
// vector) by algo on the ranks of s.
func reduceScatterCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	switch algo {
	case topo.Ring:
		return ringReduceScatterCost(m, s, n)
	case topo.Rabenseifner:
		return rabenseifnerReduceScatterCost(m, s, n)
	case topo.Linear:
		return linearReduceScatterCost(m, s, n)
	case topo.Shared:
		return sharedReduceScatterCost(m, s, n)
	}
	return never
}

// workCost is what the ring and Rabenseifner reduce-scatters pay to
// reduce into a copy of the whole vector, which every rank makes at once:
// a copy costs about what a reduction does (memory's speed; less than
// Local.Beta over TCP). (Reduce's own work copy is left out of its model,
// which the hierarchical all-reduce's choice rests on.)
func workCost(m topo.Model, s topo.Shape, n float64) float64 { return n * m.GammaBusy(s.PerHost) }

// ringReduceScatterTo runs the ring reduce-scatter on a copy of send and
// leaves this rank's block in recv.
func ringReduceScatterTo[T spmd.Number](k *call, send, recv []T, b []int, op Op[T]) error {
	work, r := workFor(k, send, nil), k.cc.Rank()
	if err := ringReduceScatter(k, work, b, r, op, tag(k.coll, phaseMain)); err != nil {
		return err
	}
	copy(recv, work[b[r]:b[r+1]])
	return nil
}

// ringReduceScatterCost is ringReduceScatterTo's: the work copy, and p-1
// steps of a block, each reduced.
func ringReduceScatterCost(m topo.Model, s topo.Shape, n float64) estimate {
	block := n / float64(s.P)
	return estimate{workCost(m, s, n) + ringCost(m, s, block, block), ringMessages(s.P)}
}

// rabenseifnerReduceScatter folds the extra ranks in, halves over the
// super-blocks of the core, and hands each extra rank its block back.
func rabenseifnerReduceScatter[T spmd.Number](k *call, send, recv []T, b []int, op Op[T]) error {
	cc, ctx := k.cc, k.ctx
	n, r := len(send), cc.Rank()
	f := newFold(cc.Size(), r)
	scr := borrow[T](k, 2*n)
	work, tmp := scr[:n], scr[n:]
	copy(work, send)
	if err := foldIn(k, f, work, tmp, op); err != nil {
		return err
	}
	t := tag(k.coll, phaseUnfold)
	if f.out() {
		return recvFrom(ctx, cc, f.partner(), t, recv)
	}
	if err := halve(k, f, work, tmp, f.superBounds(k, b), op); err != nil {
		return err
	}
	if f.paired() {
		pr := f.partner()
		if err := sendTo(ctx, cc, pr, t, work[b[pr]:b[pr+1]]); err != nil {
			return err
		}
	}
	copy(recv, work[b[r]:b[r+1]])
	return nil
}

// rabenseifnerReduceScatterCost is rabenseifnerReduceScatter's: the work
// copy, the fold (the extra ranks' blocks back), halving.
func rabenseifnerReduceScatterCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{workCost(m, s, n) + (foldCost(m, s, n, n/float64(s.P), true) + halvingCost(m, s, n, true)),
		doublingMessages(s.P) + foldMessages(s.P)}
}

// linearReduceScatter has every rank send block j of its vector straight
// to rank j, and reduce the blocks it receives into its own.
func linearReduceScatter[T spmd.Number](k *call, send, recv []T, b []int, op Op[T]) error {
	cc, ctx := k.cc, k.ctx
	p, r := cc.Size(), cc.Rank()
	t := tag(k.coll, phaseMain)
	sends := newPending()
	defer sends.free()
	for s := 1; s < p; s++ {
		to := mod(r+s, p)
		sends.isend(ctx, cc, to, t, spmd.Bytes(send[b[to]:b[to+1]]))
	}
	copyIn(recv, send[b[r]:b[r+1]])
	tmp := borrow[T](k, len(recv))
	for s := 1; s < p; s++ {
		if err := recvFrom(ctx, cc, mod(r-s, p), t, tmp); err != nil {
			return err
		}
		op.reduce(recv, tmp)
	}
	return sends.waitAll(ctx)
}

// linearReduceScatterCost is linearReduceScatter's: one burst of p-1
// blocks, each reduced.
func linearReduceScatterCost(m topo.Model, s topo.Shape, n float64) estimate {
	block := n / float64(s.P)
	return estimate{m.Burst(s, block, block), ringMessages(s.P)}
}
