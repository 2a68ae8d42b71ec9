package prims

import (
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Binomial trees, rooted anywhere: ranks are renumbered relative to the
// root (vr = rank-root mod p); vr's parent is vr with its lowest set bit
// cleared, its children vr+1, vr+2, vr+4, ... below that bit.

// treeBcast broadcasts buf from root down a binomial tree: lg p rounds.
func treeBcast[T spmd.Number](k *call, buf []T, root, phase int) error {
	cc, ctx := k.cc, k.ctx
	p := cc.Size()
	vr := mod(cc.Rank()-root, p)
	t := tag(k.coll, phase)
	mask := 1
	for ; mask < p; mask <<= 1 {
		if vr&mask != 0 {
			if err := recvFrom(ctx, cc, mod(vr-mask+root, p), t, buf); err != nil {
				return err
			}
			break
		}
	}
	sends := newPending()
	defer sends.free()
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < p {
			sends.isend(ctx, cc, mod(vr+mask+root, p), t, spmd.Bytes(buf))
		}
	}
	return sends.waitAll(ctx)
}

// treeReduce reduces src up a binomial tree to root, where the result
// lands in work. work may be src (in place); elsewhere it is a buffer of
// src's length the reduction may use, or nil to borrow one if needed.
func treeReduce[T spmd.Number](k *call, src, work []T, root int, op Op[T]) error {
	cc, ctx := k.cc, k.ctx
	p := cc.Size()
	vr := mod(cc.Rank()-root, p)
	t := tag(k.coll, phaseMain)
	cur := src // what this rank has reduced so far
	var tmp []T
	for mask := 1; mask < p; mask <<= 1 {
		if vr&mask != 0 {
			return sendTo(ctx, cc, mod(vr-mask+root, p), t, cur)
		}
		child := vr | mask
		if child >= p {
			continue
		}
		if tmp == nil {
			if work == nil {
				scr := borrow[T](k, 2*len(src))
				tmp, work = scr[:len(src)], scr[len(src):]
			} else {
				tmp = borrow[T](k, len(src))
			}
			copyIn(work, src)
			cur = work
		}
		if err := recvFrom(ctx, cc, mod(child+root, p), t, tmp); err != nil {
			return err
		}
		op.reduce(cur, tmp)
	}
	copyIn(work, cur)
	return nil
}

// subtree returns how many relative ranks the binomial subtree of vr
// spans: vr's lowest set bit (p for the root), clipped at p.
func subtree(vr, p int) int {
	if vr == 0 {
		return p
	}
	return min(vr&-vr, p-vr)
}

// rootBlocks returns where relative ranks [v, v+n) lie in the root's
// buffer of blocks of kk in absolute order, or ok=false when they wrap
// past the last rank.
func rootBlocks(v, n, root, p, kk int) (lo, hi int, ok bool) {
	a := mod(v+root, p)
	return a * kk, (a + n) * kk, a+n <= p
}

// treeGather gathers up a binomial tree: each rank collects its subtree's
// blocks in relative order and sends them to its parent in one message.
// The root receives each child's blocks in place unless they wrap.
func treeGather[T spmd.Number](k *call, send, recv []T, root int) error {
	cc, ctx := k.cc, k.ctx
	p, kk := cc.Size(), len(send)
	vr := mod(cc.Rank()-root, p)
	t := tag(k.coll, phaseMain)
	var tmp []T // this rank's subtree, in relative order (not at the root)
	if sub := subtree(vr, p); vr != 0 && sub > 1 {
		tmp = borrow[T](k, sub*kk)
		copy(tmp, send)
	}
	for mask := 1; mask < p; mask <<= 1 {
		if vr&mask != 0 {
			out := send
			if tmp != nil {
				out = tmp
			}
			return sendTo(ctx, cc, mod(vr-mask+root, p), t, out)
		}
		child := vr + mask
		if child >= p {
			continue
		}
		n := min(mask, p-child)
		from := mod(child+root, p)
		if vr != 0 {
			if err := recvFrom(ctx, cc, from, t, tmp[mask*kk:(mask+n)*kk]); err != nil {
				return err
			}
			continue
		}
		if err := recvRooted(k, recv, child, n, root, from, t); err != nil {
			return err
		}
	}
	copyIn(recv[root*kk:(root+1)*kk], send)
	return nil
}

// recvRooted receives at the root the blocks of relative ranks [v, v+n)
// into their absolute places in buf, through scratch when they wrap.
func recvRooted[T spmd.Number](k *call, buf []T, v, n, root, from, t int) error {
	p := k.cc.Size()
	kk := len(buf) / p
	if lo, hi, ok := rootBlocks(v, n, root, p, kk); ok {
		return recvFrom(k.ctx, k.cc, from, t, buf[lo:hi])
	}
	tmp := borrow[T](k, n*kk)
	if err := recvFrom(k.ctx, k.cc, from, t, tmp); err != nil {
		return err
	}
	a := mod(v+root, p)
	split := (p - a) * kk
	copy(buf[a*kk:], tmp[:split])
	copy(buf, tmp[split:])
	return nil
}

// treeScatter scatters down a binomial tree, the reverse of treeGather.
func treeScatter[T spmd.Number](k *call, send, recv []T, root int) error {
	cc, ctx := k.cc, k.ctx
	p, kk := cc.Size(), len(recv)
	vr := mod(cc.Rank()-root, p)
	t := tag(k.coll, phaseMain)
	sub := subtree(vr, p)
	have := recv // this rank's subtree, in relative order (not at the root)
	if vr != 0 {
		if sub > 1 {
			have = borrow[T](k, sub*kk)
		}
		if err := recvFrom(ctx, cc, mod(vr-(vr&-vr)+root, p), t, have); err != nil {
			return err
		}
	}
	sends := newPending()
	defer sends.free()
	for mask := highBit(sub - 1); mask > 0; mask >>= 1 {
		child := vr + mask
		if child >= p {
			continue
		}
		n := min(mask, p-child)
		to := mod(child+root, p)
		if vr != 0 {
			sends.isend(ctx, cc, to, t, spmd.Bytes(have[mask*kk:(mask+n)*kk]))
			continue
		}
		if err := sendRooted(k, sends, send, child, n, root, to, t); err != nil {
			return err
		}
	}
	if vr == 0 {
		copyIn(recv, send[root*kk:(root+1)*kk])
	} else if sub > 1 {
		copy(recv, have[:kk])
	}
	return sends.waitAll(ctx)
}

// sendRooted sends from the root the blocks of relative ranks [v, v+n)
// from their absolute places in buf, through scratch when they wrap.
func sendRooted[T spmd.Number](k *call, sends *pending, buf []T, v, n, root, to, t int) error {
	p := k.cc.Size()
	kk := len(buf) / p
	if lo, hi, ok := rootBlocks(v, n, root, p, kk); ok {
		sends.isend(k.ctx, k.cc, to, t, spmd.Bytes(buf[lo:hi]))
		return nil
	}
	tmp := borrow[T](k, n*kk)
	a := mod(v+root, p)
	split := (p - a) * kk
	copy(tmp, buf[a*kk:])
	copy(tmp[split:], buf[:n*kk-split])
	sends.isend(k.ctx, k.cc, to, t, spmd.Bytes(tmp))
	return nil
}

// highBit returns the highest power of two <= x, or 0 for x <= 0.
func highBit(x int) int {
	h := 0
	for b := 1; b > 0 && b <= x; b <<= 1 {
		h = b
	}
	return h
}

// The costs of the binomial trees (their rounds as if rooted at rank 0:
// the model does not tell roots apart).

// treeBcastCost is treeBcast's: lg p rounds of the whole buffer, p-1
// messages.
func treeBcastCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{binomialCost(m, s, func(int) float64 { return n }, false), float64(s.P - 1)}
}

// treeReduceCost is treeReduce's: lg p rounds of the whole buffer, each
// reduced, p-1 messages.
func treeReduceCost(m topo.Model, s topo.Shape, n float64) estimate {
	return estimate{binomialCost(m, s, func(int) float64 { return n }, true), float64(s.P - 1)}
}

// treeGatherCost is treeGather's, or treeScatter's, of n bytes in p
// blocks: the round at distance d moves the d blocks of a subtree.
func treeGatherCost(m topo.Model, s topo.Shape, n float64) estimate {
	block := n / float64(s.P)
	return estimate{binomialCost(m, s, func(d int) float64 { return block * float64(min(d, s.P-d)) }, false), float64(s.P - 1)}
}

// binomialCost is a binomial tree rooted at rank 0 (a broadcast when
// reduce is false, a reduction when true): in the round at distance d, the
// ranks r%(2d)==0 exchange size(d) bytes with r+d.
func binomialCost(m topo.Model, s topo.Shape, size func(d int) float64, reduce bool) float64 {
	return binomialTreeCost(m, s, size, reduce, false)
}

// binomialTreeCost is binomialCost, with topo.Model.CrowdedWhole charged
// for every round when chargeWhole is set.
func binomialTreeCost(m topo.Model, s topo.Shape, size func(d int) float64, reduce, chargeWhole bool) float64 {
	t := 0.0
	for k := 0; 1<<k < s.P; k++ {
		d := 1 << k
		senders := (s.P - d + 2*d - 1) / (2 * d) // r%(2d)==0 with r+d < p
		perHost := max(1, min(senders, (senders+s.Hosts-1)/s.Hosts+1, s.PerHost))
		red := 0.0
		if reduce {
			red = size(d)
		}
		b, cross := size(d), s.Layout.TreeCrosses(k)
		t += m.Step(s, cross, b, red, 2*perHost, perHost)
		if chargeWhole {
			t += m.CrowdedWhole(s, cross, b, 2*perHost)
		}
	}
	return t
}

// treeLatencyCost is ceil(lg p) rounds of empty messages.
func treeLatencyCost(m topo.Model, s topo.Shape) float64 {
	return binomialCost(m, s, func(int) float64 { return 0 }, false)
}
