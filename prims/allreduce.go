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
	k, err := start(ctx, c, topo.AllReduce, n*sizeOf[T](), n == 0 || c.Size() == 1, sig[T](-1, op.name), opts)
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
	case topo.Linear:
		return linearAllReduce(k, buf, op)
	case topo.Rabenseifner:
		return rabenseifnerAllReduce(k, buf, op)
	case topo.Hierarchical:
		return hierAllReduce(k, buf, op)
	case topo.Shared:
		return sharedAllReduce(k, buf, op)
	}
	return algoError(k.coll, k.algo)
}

// allReduceCost is the cost of an all-reduce of n bytes by algo on the
// ranks of s.
func allReduceCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	switch algo {
	case topo.Ring:
		return ringAllReduceCost(m, s, n)
	case topo.Tree:
		return treeAllReduceCost(m, s, n)
	case topo.RecursiveDoubling:
		return recdblAllReduceCost(m, s, n)
	case topo.Linear:
		return linearAllReduceCost(m, s, n)
	case topo.Rabenseifner:
		return rabenseifnerAllReduceCost(m, s, n)
	case topo.Hierarchical:
		return hierAllReduceCost(m, s, n)
	case topo.Shared:
		return sharedAllReduceCost(m, s, n)
	}
	return never
}

// ringAllReduce is a segmented ring reduce-scatter followed by a ring
// allgather: 2(p-1) steps each moving n/p elements per rank.
func ringAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	p := k.cc.Size()
	b := k.bounds(len(buf), p)
	own := mod(k.cc.Rank()+1, p)
	if err := ringReduceScatter(k, buf, b, own, op, tag(k.coll, phaseMain)); err != nil {
		return err
	}
	return ringAllGather(k, buf, b, own, nil, tag(k.coll, phaseGather))
}

// ringAllReduceCost is ringAllReduce's: 2(p-1) steps of n/p bytes. The
// segments are reduced while the next arrive, so only the last segment's
// reduction is not hidden; unless the ranks share cores and copy the
// segments themselves (topo.Link.Pull), when copying and reducing take
// turns on them.
func ringAllReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	p := float64(s.P)
	red := min(n/p, SegmentBytes)
	if s.PerHost > m.Cores && m.Pulls(s.Hosts > 1, red) {
		red = (p - 1) * n / p
	}
	return estimate{2*ringCost(m, s, n/p, 0) + red*m.GammaBusy(s.PerHost), 2 * ringMessages(s.P)}
}

// treeAllReduceCost is the tree all-reduce's, treeReduce then treeBcast:
// up the tree and down again, its whole messages up charged
// topo.Model.CrowdedWhole.
func treeAllReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	whole := func(int) float64 { return n }
	return estimate{binomialTreeCost(m, s, whole, true, true) + binomialCost(m, s, whole, false), float64(2 * (s.P - 1))}
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

// recdblAllReduceCost is recdblAllReduce's: the fold, then lg p rounds of
// the whole vector.
func recdblAllReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	whole := func(int) float64 { return n }
	return estimate{foldCost(m, s, n, n, true) + doublingCost(m, s, whole, whole), doublingMessages(s.P) + foldMessages(s.P)}
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
		sb := k.bounds(len(buf), f.pp)
		if err := halve(k, f, buf, tmp, sb, op); err != nil {
			return err
		}
		if err := double(k, f, buf, sb, phaseDouble); err != nil {
			return err
		}
	}
	return foldOut(k, f, buf)
}

// rabenseifnerAllReduceCost is rabenseifnerAllReduce's: the fold, halving,
// doubling.
func rabenseifnerAllReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{foldCost(m, s, n, n, true) + halvingCost(m, s, n, true) + halvingCost(m, s, n, false), 2*doublingMessages(s.P) + foldMessages(s.P)}
}

// linearAllReduce has every rank send its vector to rank 0, which reduces
// them in rank order and sends the sum back to each: 2(p-1) messages, as
// few as the tree's, in 2 rounds rather than 2 lg p. Where a host has more
// ranks than cores, the messages bound a small collective, not its rounds
// (topo.Model.CrowdedWork), and the root's work overlaps the others' waiting.
// Over TCP on 2 cores, 8 B-4 KiB, medians of 3 rounds in turns (collbench
// -r 3): np 4 41-58 us against recursive doubling's 46-67 and the tree's
// 42-67; np 8 92-130 against 144-201 and 124-165.
//
// The root posts its p-1 receives at once, so that they land as they come
// rather than wait behind a slower rank's, unless they would take more
// than linearPrepost bytes of scratch; then it receives them in turn, as
// the linear Reduce does.
func linearAllReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	p, n := k.cc.Size(), len(buf)
	var err error
	if k.cc.Rank() == 0 && (p-1)*n*sizeOf[T]() <= linearPrepost {
		err = prepostedReduce(k, buf, op)
	} else {
		err = linearReduce(k, buf, buf, 0, op)
	}
	if err != nil {
		return err
	}
	return linearBcast(k, buf, 0)
}

// prepostedReduce is linearReduce's root with its p-1 receives posted at
// once, each into its own part of the scratch, reduced in rank order.
func prepostedReduce[T spmd.Number](k *call, buf []T, op Op[T]) error {
	cc, t := k.cc, tag(k.coll, phaseMain)
	p, n := cc.Size(), len(buf)
	tmp := borrow[T](k, (p-1)*n)
	reqs := newPending()
	defer reqs.free()
	for r := 1; r < p; r++ {
		reqs.irecv(cc, r, t, spmd.Bytes(tmp[(r-1)*n:r*n]))
	}
	for r := 1; r < p; r++ {
		if err := reqs.wait(k.ctx, r-1); err != nil {
			return err
		}
		op.reduce(buf, tmp[(r-1)*n:r*n])
	}
	reqs.reset()
	return nil
}

// linearPrepost is the most scratch, in bytes, that linearAllReduce's root
// takes to post all its receives at once.
const linearPrepost = 1 << 20

// linearAllReduceCost is linearAllReduce's. Every rank sends to the root
// at once and the root has posted its receives at once: a burst into one
// rank (one latency, topo.BurstGap for each further message, the bytes in
// turn), the senders idle after, so no rank waits for a core; the root
// reduces each message as it comes (whole messages on a crowded host
// charged as the tree's), then broadcasts linearly. 2(p-1) messages.
func linearAllReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	cross := s.Hosts > 1
	a, k := m.Link(cross).Alpha, float64(s.P-1)
	each := m.Copies(cross, n)*n*m.Beta(s, cross, m.Copiers(cross, n, 2)) + n*m.GammaBusy(1) + m.CrowdedWhole(s, cross, n, 2)
	return estimate{a + (k-1)*topo.BurstGap*a + k*each + linearBcastCost(m, s, n).rounds, float64(2 * (s.P - 1))}
}
