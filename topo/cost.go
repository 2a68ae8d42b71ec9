package topo

import (
	"math"
	"math/bits"
)

// The formulas below follow DESIGN.md ("Choosing algorithms"), with four
// refinements the measurements asked for:
//
//   - a round that crosses hosts pays the Remote link; one that stays on
//     every host pays the Local one. For the distance-based schedules the
//     Layout knows which rounds cross;
//   - a host whose busy ranks outnumber its cores shares them: the bytes of
//     a round cost Beta times (message endpoints on the busiest host)/Cores
//     when that exceeds 1 (a ping-pong has 2 endpoints), and a reduction
//     costs Gamma times (reducing ranks)/Cores;
//   - non-power-of-two rank counts pay the fold steps of recursive doubling
//     and Rabenseifner (the extra ranks hand their data to a partner first
//     and get the result back last);
//   - on one host with more ranks than cores, no collective costs less than
//     the core time its messages take (crowdedWork), whatever its rounds
//     add up to.
//
// n is the size of the call's whole buffer, as Choose counts it.

// shape is what the formulas need to know about a layout.
type shape struct {
	p, hosts, perHost int
	lay               Layout
}

func (m Model) cost(coll Collective, algo Algo, p int, n float64, lay Layout) float64 {
	if p <= 1 {
		return 0
	}
	s := shapeOf(p, lay)
	return max(m.rounds(coll, algo, s, n), m.crowdedWork(coll, algo, s))
}

// shapeOf is the shape of p ranks laid out as lay (fitted to p).
func shapeOf(p int, lay Layout) shape {
	return shape{p: p, hosts: len(lay.Hosts), perHost: lay.MaxPerHost(), lay: lay}
}

// rounds is the cost of a collective as its rounds add up.
func (m Model) rounds(coll Collective, algo Algo, s shape, n float64) float64 {
	lay := s.lay
	if algo == Hierarchical {
		if !lay.Hierarchical() {
			return math.Inf(1)
		}
		return m.hier(coll, s, n)
	}
	if algo == Shared {
		if !lay.Shared || s.hosts > 1 {
			return math.Inf(1)
		}
		return m.shared(coll, s, n)
	}
	switch coll {
	case AllReduce:
		return m.allReduce(algo, s, n)
	case Broadcast:
		return m.broadcast(algo, s, n)
	case Reduce:
		return m.reduce(algo, s, n)
	case Gather, Scatter:
		return m.gather(algo, s, n)
	case AllGather:
		return m.allGather(algo, s, n)
	case ReduceScatter:
		// Ring and Rabenseifner reduce into a copy of the whole vector,
		// which every rank makes at once: a copy costs about what a
		// reduction does (memory's speed; less than Local.Beta over TCP).
		// (Reduce's own work copy is left out of its model, which the
		// hierarchical all-reduce's choice rests on.)
		work := 0.0
		if algo == Ring || algo == Rabenseifner {
			work = n * m.gamma(s.perHost)
		}
		return work + m.reduceScatter(algo, s, n)
	case AllToAll:
		return m.burst(s, n/float64(s.p), 0) // every block posted at once
	case Barrier:
		if algo == Tree {
			return 2 * m.treeLatency(s)
		}
		return m.treeLatency(s)
	}
	return math.Inf(1)
}

// alpha is the latency of one message over the link class, grown by Wake
// for every rank of the busiest host beyond its cores.
func (m Model) alpha(s shape, cross bool) float64 {
	return m.alphaBusy(s, cross, s.perHost)
}

// alphaBusy is alpha for a round in which busy ranks of the busiest host
// take part: a rank waits its turn for a core only when the round keeps
// more ranks busy than the host has cores. Measured on 2 cores with 4 and
// 8 ranks: schedules that keep few ranks busy per round (a binomial tree's
// later rounds, a root sending to each rank in turn) beat those that keep
// every rank busy in every round (recursive doubling, Rabenseifner) at all
// but the smallest sizes, which charging every round the whole host's
// excess could not show.
func (m Model) alphaBusy(s shape, cross bool, busy int) float64 {
	return m.link(cross).Alpha + m.Wake*float64(max(0, min(busy, s.perHost)-m.Cores))
}

// link is the Remote link for a round that crosses hosts, else the Local one.
func (m Model) link(cross bool) Link {
	if cross {
		return m.Remote
	}
	return m.Local
}

// beta is the seconds per byte of a round over the link class with busy
// message endpoints on the busiest host.
func (m Model) beta(s shape, cross bool, busy int) float64 {
	b := m.link(cross).Beta * m.share(busy)
	if s.perHost > m.Cores {
		b *= CrowdedCopy
	}
	return b
}

// CrowdedCopy is how much more the bytes of a message cost on a host with
// more ranks than cores than Beta's share of the cores says. Against the
// Shared algorithms, whose rounds the model times within 5% (all-reduce
// of 16 MiB at 4 and 8 ranks on 2 cores: 15.6 and 33.0 ms modelled, 15.3
// and 34.5 measured), the message algorithms took 1.6-1.9x their modelled
// time at 4-64 MiB: a rank that waits for its peer's copy gives up its
// core and has to be scheduled again, and the copies of large messages
// compete for memory. Replayed (bench/replay) over three kept runs of
// bench/choice.sh without the Shared algorithms (423 sizes of all-reduce,
// broadcast and all-gather at 4 and 8 ranks) and one with them (48 sizes
// of all-reduce): 1 gives 328 and 36 choices within 15% of the fastest,
// 1.3 328 and 42, 1.5 328 and 48, 1.7 and 2 327 and 48.
const CrowdedCopy = 1.5

// copiers is how many of busy message endpoints copy bytes of a message
// of b bytes: all of them, except where the receiver copies straight out
// of the sender's memory (Link.Pull) and the sender only waits.
func (m Model) copiers(cross bool, b float64, busy int) int {
	if m.pulls(cross, b) {
		return (busy + 1) / 2
	}
	return busy
}

// pulls reports whether a message of b bytes over the link class is copied
// by its receiver alone (Link.Pull).
func (m Model) pulls(cross bool, b float64) bool {
	k := m.link(cross)
	return k.Pull > 0 && b >= k.Pull
}

// gamma is the seconds per byte of a reduction done by busy ranks of one host at once.
func (m Model) gamma(busy int) float64 { return m.Gamma * m.share(busy) }

// share is how much slower work runs when busy ranks share a host's cores.
func (m Model) share(busy int) float64 {
	return max(1, float64(busy)/float64(max(1, m.Cores)))
}

// step is one round: a message of bytes bytes, red of which the receiver
// reduces, with busy endpoints and reducers on the busiest host.
func (m Model) step(s shape, cross bool, bytes, red float64, busy, reducers int) float64 {
	return m.alphaBusy(s, cross, busy) + bytes*m.beta(s, cross, m.copiers(cross, bytes, busy)) + red*m.gamma(reducers)
}

// ring is p-1 steps in which every rank sends a block of b bytes to its
// right neighbour and reduces red bytes of what it receives.
func (m Model) ring(s shape, b, red float64) float64 {
	cross := s.hosts > 1
	return float64(s.p-1) * m.step(s, cross, b, red, 2*s.perHost, s.perHost)
}

// BurstGap is what each message after the first of a burst adds, as a
// fraction of the link's alpha: posting a message costs its sender a part
// of the one-way latency (LogP's o against L), the rest overlaps.
const BurstGap = 0.25

// burst is one round in which every rank posts its p-1 messages of b bytes
// (one to every other rank) and its p-1 receives at once, reducing red
// bytes of each message: the wake-up latency is paid once, each further
// message costs BurstGap of alpha, and the bytes cost what a ring's p-1
// steps move. The linear all-gather, reduce-scatter and all-to-all run
// so; the model used to charge them the ring's p-1 rounds. Replayed
// against five kept runs of bench/choice.sh (bench/replay, 705 sizes of
// all-reduce, broadcast and all-gather at 4 and 8 ranks on 2 cores): 580
// choices within 15% of the fastest against 571, the same with a gap of
// half alpha, 571 with a whole alpha.
func (m Model) burst(s shape, b, red float64) float64 {
	cross := s.hosts > 1
	busy := 2 * s.perHost
	k := float64(s.p - 1)
	return m.alphaBusy(s, cross, busy) + (k-1)*BurstGap*m.link(cross).Alpha +
		k*(b*m.beta(s, cross, m.copiers(cross, b, busy))+red*m.gamma(s.perHost)+m.unsegmented(s, cross, b, busy))
}

// lg returns ceil(log2 p); pow2 the largest power of two <= p.
func lg(p int) int { return bits.Len(uint(p - 1)) }

func pow2(p int) int { return 1 << (bits.Len(uint(p)) - 1) }

// fold is the cost of the fold steps of a non-power-of-two doubling
// schedule: the extra ranks send n bytes (reduced by the partner when
// reduce) and get back n2 bytes at the end.
func (m Model) fold(s shape, n, n2 float64, reduce bool) float64 {
	extra := s.p - pow2(s.p)
	if extra == 0 {
		return 0
	}
	red := 0.0
	if reduce {
		red = n
	}
	busy := min(2*extra, 2*s.perHost)
	cross := s.hosts > 1
	return m.step(s, cross, n, red, busy, min(extra, s.perHost)) + m.step(s, cross, n2, 0, busy, 0)
}

// doubling is recursive doubling over the pow2(p) ranks: in round k each
// rank exchanges size(k) bytes with rank^(1<<k) and reduces red(k) of them.
func (m Model) doubling(s shape, size, red func(k int) float64) float64 {
	q := pow2(s.p)
	busy := 2 * min(s.perHost, q)
	t := 0.0
	for k := 0; 1<<k < q; k++ {
		b := size(k)
		t += m.step(s, s.lay.xorCross[k], b, red(k), busy, min(s.perHost, q)) + m.unsegmented(s, s.lay.xorCross[k], b, busy)
	}
	return t
}

// unsegmented is the extra cost of moving a message of b bytes in one
// piece: past the first Overlap bytes, the sender's copy in and the
// receiver's copy out follow each other instead of overlapping as a
// segmented pipeline's do, so those bytes cost beta once more. Measured
// with bench/choice.sh on 2 cores: the segmented ring all-gather overtook
// recursive doubling from 64-128 KiB, which one beta per byte could not
// show.
func (m Model) unsegmented(s shape, cross bool, b float64, busy int) float64 {
	if m.pulls(cross, b) {
		return 0 // one copy, by the receiver, straight out of the sender's memory
	}
	return max(0, b-Overlap) * m.beta(s, cross, busy)
}

// Overlap is how much of a message sent in one piece is modelled as
// overlapping with its receipt. It was a whole segment (256 KiB); replaying
// three kept runs of bench/choice.sh against the model (4 and 8 ranks on 2
// cores, all-reduce, broadcast and all-gather, 423 sizes) gave 342 choices
// within 15% of the fastest with 256 KiB, 348 with 128 KiB, 354 with
// 64 KiB, 355 with 32 KiB, 353 with 16 KiB and 344 with none: all of the
// gain in all-gather, where recursive doubling was chosen at 128-512 KiB
// and ran 1.2-2.3x slower than the ring. A frame of up to a quarter of a
// shm ring (256 KiB) is written whole before the receiver sees it.
const Overlap = 64 << 10

// binomial is a binomial tree rooted at rank 0 (broadcast when red is
// false, reduce when true): in the round at distance d, the ranks
// r%(2d)==0 exchange size(d) bytes with r+d.
func (m Model) binomial(s shape, size func(d int) float64, reduce bool) float64 {
	return m.binomialTree(s, size, reduce, false)
}

// binomialTree is binomial, with crowdedWhole charged for every round when
// chargeWhole is set.
func (m Model) binomialTree(s shape, size func(d int) float64, reduce, chargeWhole bool) float64 {
	t := 0.0
	for k := 0; 1<<k < s.p; k++ {
		d := 1 << k
		senders := (s.p - d + 2*d - 1) / (2 * d) // r%(2d)==0 with r+d < p
		perHost := max(1, min(senders, (senders+s.hosts-1)/s.hosts+1, s.perHost))
		red := 0.0
		if reduce {
			red = size(d)
		}
		b, cross := size(d), s.lay.addCross[k]
		t += m.step(s, cross, b, red, 2*perHost, perHost)
		if chargeWhole {
			t += m.crowdedWhole(s, cross, b, 2*perHost)
		}
	}
	return t
}

// treeLatency is ceil(lg p) rounds of empty messages.
func (m Model) treeLatency(s shape) float64 {
	return m.binomial(s, func(int) float64 { return 0 }, false)
}

func (m Model) allReduce(algo Algo, s shape, n float64) float64 {
	p := float64(s.p)
	switch algo {
	case Ring:
		// prims' ring is segmented: a segment is reduced while the next
		// arrives, so only the last segment's reduction is not hidden;
		// unless the ranks share cores and copy the segments themselves
		// (Link.Pull), when copying and reducing take turns on them.
		red := min(n/p, Segment)
		if s.perHost > m.Cores && m.pulls(s.hosts > 1, red) {
			red = (p - 1) * n / p
		}
		return 2*m.ring(s, n/p, 0) + red*m.gamma(s.perHost)
	case RecursiveDoubling:
		whole := func(int) float64 { return n }
		return m.fold(s, n, n, true) + m.doubling(s, whole, whole)
	case Rabenseifner:
		return m.fold(s, n, n, true) + m.halving(s, n, true) + m.halving(s, n, false)
	case Tree:
		whole := func(int) float64 { return n }
		return m.binomialTree(s, whole, true, true) + m.binomial(s, whole, false)
	case Linear:
		// Every rank sends to the root at once and the root has posted
		// its receives at once: a burst into one rank (one latency,
		// BurstGap for each further message, the bytes in turn), the
		// senders idle after, so no rank waits for a core; the root
		// reduces each message as it comes (whole messages on a crowded
		// host charged as the tree's), then broadcasts linearly.
		cross := s.hosts > 1
		a, k := m.link(cross).Alpha, float64(s.p-1)
		each := n*m.beta(s, cross, m.copiers(cross, n, 2)) + n*m.gamma(1) + m.crowdedWhole(s, cross, n, 2)
		return a + (k-1)*BurstGap*a + k*each + m.broadcast(Linear, s, n)
	}
	return math.Inf(1)
}

// halving is the recursive-halving reduce-scatter (reduce) or the mirrored
// recursive-doubling all-gather over pow2(p) ranks: the round at distance
// q/2 moves n/2 bytes, the one at q/4 n/4, and so on.
func (m Model) halving(s shape, n float64, reduce bool) float64 {
	q := pow2(s.p)
	return m.doubling(s, func(k int) float64 { return n * float64(int(1)<<k) / float64(q) },
		func(k int) float64 {
			if reduce {
				return n * float64(int(1)<<k) / float64(q)
			}
			return 0
		})
}

func (m Model) broadcast(algo Algo, s shape, n float64) float64 {
	switch algo {
	case Tree:
		return m.binomial(s, func(int) float64 { return n }, false)
	case Ring:
		return m.chain(s, n)
	case Linear:
		if k := m.Local; s.hosts == 1 && k.Pull > 0 && n >= k.Pull {
			return m.pulled(s, n)
		}
		// The root sends to one rank after another while all p wait:
		// the first message pays the wake-up of the ranks beyond the
		// cores, as pulled's offers do. Without it the model chose
		// linear at every size over TCP with 4 and 8 ranks on 2 cores,
		// where the tree or the chain took 0.5-0.8x its time below
		// 1 MiB: replayed against bench/results/choice/tcp-b, broadcast
		// within 15% of the fastest at 8 and 10 of 24 sizes (np 4, 8)
		// without it, 22 and 16 with it; shm-a unchanged.
		cross := s.hosts > 1
		wake := m.alphaBusy(s, cross, s.p) - m.link(cross).Alpha
		return wake + float64(s.p-1)*m.step(s, cross, n, 0, 2, 0)
	}
	return math.Inf(1)
}

// pulled is a root on a host of p ranks sending n bytes to each other rank
// where the receivers copy them out of its memory (Link.Pull): it posts
// p-1 offers at once (one wake-up latency, BurstGap for each further), and
// the p-1 receivers copy at once, sharing the host's cores. A root that
// copied into each receiver's ring in turn paid p-1 copies; measured at
// np 4 on 2 cores (collbench, 1-64 MiB), the linear broadcast ran 1.1-1.9x
// the bus bandwidth of the binomial tree, which the model, pricing it so,
// had tied with it and chose by turns.
func (m Model) pulled(s shape, n float64) float64 {
	k := float64(s.p - 1)
	return m.alphaBusy(s, false, s.p) + (k-1)*BurstGap*m.Local.Alpha + n*m.beta(s, false, s.p-1)
}

// Segment is the piece size that pipelined algorithms are modelled with:
// a chain broadcast sends its buffer in pieces of at most Segment bytes.
// It is prims.SegmentBytes (prims tests that they agree).
const Segment = 1 << 20

// chain is a pipelined chain broadcast: the buffer in k pieces of at most
// Segment bytes flows down the ranks, p-1+k-1 steps of one piece.
func (m Model) chain(s shape, n float64) float64 {
	k := max(1, math.Ceil(n/Segment))
	steps := float64(s.p - 2 + int(k))
	busy := 2 * min(s.perHost, int(k)+1)
	return steps * m.step(s, s.hosts > 1, n/k, 0, busy, 0)
}

func (m Model) reduce(algo Algo, s shape, n float64) float64 {
	p := float64(s.p)
	switch algo {
	case Tree:
		return m.binomial(s, func(int) float64 { return n }, true)
	case Ring:
		return m.reduceScatter(Ring, s, n) + m.gather(Linear, s, n)
	case Rabenseifner:
		return m.fold(s, n, 0, true) - m.alpha(s, s.hosts > 1) + m.halving(s, n, true) + m.binomial(s, func(d int) float64 { return n * min(float64(d), p/2) / p }, false)
	case Linear:
		return float64(s.p-1) * m.step(s, s.hosts > 1, n, n, 2, 1)
	}
	return math.Inf(1)
}

// gather is Gather (or, mirrored, Scatter) of n bytes in p blocks at rank 0.
func (m Model) gather(algo Algo, s shape, n float64) float64 {
	block := n / float64(s.p)
	switch algo {
	case Linear:
		return float64(s.p-1) * m.step(s, s.hosts > 1, block, 0, 2, 0)
	case Tree:
		return m.binomial(s, func(d int) float64 { return block * float64(min(d, s.p-d)) }, false)
	}
	return math.Inf(1)
}

func (m Model) allGather(algo Algo, s shape, n float64) float64 {
	block := n / float64(s.p)
	switch algo {
	case Ring:
		return m.ring(s, block, 0)
	case Linear:
		return m.burst(s, block, 0)
	case RecursiveDoubling:
		q := float64(pow2(s.p))
		return m.fold(s, block, n, false) + m.doubling(s, func(k int) float64 { return n * float64(int(1)<<k) / q }, func(int) float64 { return 0 })
	}
	return math.Inf(1)
}

func (m Model) reduceScatter(algo Algo, s shape, n float64) float64 {
	block := n / float64(s.p)
	switch algo {
	case Ring:
		return m.ring(s, block, block)
	case Linear:
		return m.burst(s, block, block)
	case Rabenseifner:
		return m.fold(s, n, block, true) + m.halving(s, n, true)
	}
	return math.Inf(1)
}

// hier is the hierarchical algorithm: a phase inside every host (the hosts
// in parallel, the Local link), one across hosts between their leaders (the
// Remote link), and one inside every host again; each phase by its
// cheapest flat algorithm.
func (m Model) hier(coll Collective, s shape, n float64) float64 {
	local := Uniform(1, s.perHost)
	leaders := Uniform(s.hosts, 1)
	in := func(c Collective, bytes float64) float64 { return m.best(c, s.perHost, bytes, local) }
	across := func(c Collective, bytes float64) float64 { return m.best(c, s.hosts, bytes, leaders) }
	share := float64(s.perHost) / float64(s.p) // one host's part of a gathered buffer
	switch coll {
	case AllReduce:
		return in(Reduce, n) + across(AllReduce, n) + in(Broadcast, n)
	case Broadcast:
		return across(Broadcast, n) + in(Broadcast, n)
	case Reduce:
		return in(Reduce, n) + across(Reduce, n)
	case AllGather:
		return in(Gather, n*share) + across(AllGather, n) + in(Broadcast, n)
	}
	return math.Inf(1)
}

// best is the cost of the cheapest flat algorithm for coll.
func (m Model) best(coll Collective, p int, n float64, lay Layout) float64 {
	b := math.Inf(1)
	for _, a := range Algos(coll) {
		if a != Hierarchical {
			b = min(b, m.cost(coll, a, p, n, lay))
		}
	}
	return b
}
