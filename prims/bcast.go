package prims

import (
	"context"
	"math"

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
	k, err := start(ctx, c, topo.Broadcast, n*sizeOf[T](), n == 0 || c.Size() == 1, sig[T](root, ""), opts)
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

// broadcastCost is the cost of a broadcast of n bytes by algo on the
// ranks of s.
func broadcastCost(m topo.Model, algo topo.Algo, s topo.Shape, n float64) estimate {
	switch algo {
	case topo.Tree:
		return treeBcastCost(m, s, n)
	case topo.Ring:
		return estimate{chainCost(m, s, n), float64(s.P - 1)}
	case topo.Linear:
		return linearBcastCost(m, s, n)
	case topo.Hierarchical:
		return hierBcastCost(m, s, n)
	case topo.Shared:
		return sharedBcastCost(m, s, n)
	}
	return never
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

// chainCost is chainBcast's: the buffer in k segments of at most
// SegmentBytes flows down the ranks, p-1+k-1 steps of one segment.
func chainCost(m topo.Model, s topo.Shape, n float64) float64 {
	k := max(1, math.Ceil(n/SegmentBytes))
	steps := float64(s.P - 2 + int(k))
	busy := 2 * min(s.PerHost, int(k)+1)
	return steps * m.Step(s, s.Hosts > 1, n/k, 0, busy, 0)
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

// linearBcastCost is linearBcast's: p-1 messages. The root sends to one
// rank after another while all p wait: the first message pays the wake-up
// of the ranks beyond the cores, as pulledCost's offers do. Without it the
// model chose linear at every size over TCP with 4 and 8 ranks on 2 cores,
// where the tree or the chain took 0.5-0.8x its time below 1 MiB:
// replayed against bench/results/choice/tcp-b, broadcast within 15% of
// the fastest at 8 and 10 of 24 sizes (np 4, 8) without it, 22 and 16
// with it; shm-a unchanged. Where the receivers copy out of the root's
// memory, they do so at once (pulledCost).
func linearBcastCost(m topo.Model, s topo.Shape, n float64) estimate {
	if k := m.Local; s.Hosts == 1 && k.Pull > 0 && n >= k.Pull {
		return estimate{pulledCost(m, s, n), float64(s.P - 1)}
	}
	cross := s.Hosts > 1
	wake := m.AlphaBusy(s, cross, s.P) - m.Link(cross).Alpha
	return estimate{wake + float64(s.P-1)*m.Step(s, cross, n, 0, 2, 0), float64(s.P - 1)}
}

// pulledCost is a root on a host of p ranks sending n bytes to each other
// rank where the receivers copy them out of its memory (topo.Link.Pull):
// it posts p-1 offers at once (one wake-up latency, topo.BurstGap for each
// further), and the p-1 receivers copy at once, sharing the host's cores.
// A root that copied into each receiver's ring in turn paid p-1 copies;
// measured at np 4 on 2 cores (collbench, 1-64 MiB), the linear broadcast
// ran 1.1-1.9x the bus bandwidth of the binomial tree, which the model,
// pricing it so, had tied with it and chose by turns.
func pulledCost(m topo.Model, s topo.Shape, n float64) float64 {
	k := float64(s.P - 1)
	return m.AlphaBusy(s, false, s.P) + (k-1)*topo.BurstGap*m.Local.Alpha + n*m.Beta(s, false, s.P-1)
}
