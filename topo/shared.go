package topo

import "math"

// The cost of the Shared algorithms, which run on memory that the ranks of
// one host share instead of messages (package prims): rounds in which
// every rank stores a round's number and waits for the others'.

// SharedChunk is how many bytes of its part a rank publishes in one round
// of a Shared algorithm (the size of its slot in the shared memory); a
// larger buffer takes several rounds. Against 32 KiB and 1 MiB, collbench
// all-reduce on 2 cores, 3 runs: 16 MiB at np 8 34.5 ms against 41.8 and
// 47.0, at np 4 15.3 against 20.2 and 15.7.
const SharedChunk = 256 << 10

// SharedScatter is the size of a round of a Shared all-reduce from which
// each rank reduces one block of the parts and copies the others' reduced
// blocks (two waits) instead of reducing all of every part (one wait).
// collbench on 2 cores, 5 runs, fold against scatter: np 4 2 KiB 12 us
// against 14, 8 KiB 20 against 18; np 8 26 against 38, 44 against 41.
const SharedScatter = 8 << 10

// SharedLatency is the latency of one wait of a Shared algorithm, in
// which every rank stores a word and waits for the others' (a cache line
// from every rank, no message), as a fraction of the alpha of a message
// over the Local link.
const SharedLatency = 0.5

// SharedCell is the largest broadcast that the Shared algorithm sends
// through its ring of SharedCells cells, in which a root runs up to
// SharedCells broadcasts ahead of the others, instead of its two slots,
// which held the root to one broadcast ahead: there linear and tree were
// 2-3x faster than shared below 2 KiB. Broadcast on 2 cores, medians of 3
// alternating collbench runs, 2 KiB cells (slots above) against 16 KiB:
// np 4 at 4 / 8 / 16 KiB 6 / 6 / 10 us against 2 / 3 / 4 (linear 13 / 12
// / 16), np 8 12 / 14 / 18 against 5 / 5 / 7 (linear 24 / 30 / 43); at 32
// KiB, slots in both, the same.
const SharedCell = 16 << 10

// SharedCells is how many broadcasts of up to SharedCell bytes a root may
// run ahead of the slowest rank. Against 32, collbench --algo shared on 2
// cores, 3 alternating runs of 20000-100000 broadcasts: np 4 at 64 B
// 0.46-0.60 -> 0.24-0.31 us (Open MPI 0.37-0.84 in the same runs), at 16
// KiB 2.38-3.15 -> 1.76-2.09; np 8 at 64 B 0.64-1.06 -> 0.49-0.58, at 16
// KiB 3.76-4.77 -> 2.62-3.00; np 2 at 16 KiB 1.73-2.21 -> 0.49-0.76.
// 256 was no faster. The cells take 2 MiB of the area, of which a
// broadcast touches only the pages it writes.
const SharedCells = 128

// SharedStreams is how many chunks of SharedChunk bytes the root of a
// larger broadcast may run ahead of the slowest rank, through a ring of
// its own, where it ran one round ahead through its two slots.
const SharedStreams = 8

// shared is a Shared algorithm of coll, round by round as prims runs it.
func (m Model) shared(coll Collective, s shape, n float64) float64 {
	wait := SharedLatency * m.alphaBusy(s, false, s.perHost)
	if coll == Barrier || n == 0 {
		return wait
	}
	p := float64(s.p)
	copyIn := m.Local.Beta * m.share(s.perHost) // every rank copies at once
	rounds := func(n float64, round func(c float64) float64) float64 {
		full := math.Floor(n / SharedChunk)
		t := full * round(SharedChunk)
		if rest := n - full*SharedChunk; rest > 0 {
			t += round(rest)
		}
		return t
	}
	switch coll {
	case Broadcast:
		// The root runs up to SharedCells broadcasts, or SharedStreams
		// chunks of a larger one, ahead, so a crowded host's wake-ups are
		// paid once for many of them, as through a message algorithm's
		// queues: the wait per piece is a pair's. p copies of every byte
		// share the host's cores.
		pieces := max(1, math.Ceil(n/SharedChunk))
		return pieces*SharedLatency*m.alphaBusy(s, false, 2) + n*m.Local.Beta*m.share(s.p)
	case AllGather:
		// Every rank copies its block's piece in and the p-1 others' out.
		return rounds(n/p, func(c float64) float64 { return wait + p*c*copyIn })
	case AllToAll:
		// n is one rank's send buffer: a round takes a piece of each of
		// its blocks for the others, which every rank copies in, and the
		// pieces meant for it, which it copies out.
		return rounds(n, func(c float64) float64 { return wait + 2*(p-1)/p*c*copyIn })
	case ReduceScatter:
		// Every rank copies the other blocks' pieces of its part in and
		// its own into place, and reduces the p-1 others' into it.
		g := m.gamma(s.perHost)
		return rounds(n, func(c float64) float64 { return wait + c*copyIn + (p-1)/p*c*g })
	}
	return rounds(n, func(c float64) float64 { return m.sharedRound(s, c, wait) })
}

// sharedRound is one round of c bytes of a Shared all-reduce, in which
// every rank at once either copies its part in and reduces the other p-1
// parts (a fold), or copies in the blocks of its part that the others
// reduce, reduces its own block of every part, copies the result in and
// the other blocks' results out (a scatter, two waits).
//
// On a host with a core for every rank, the copies into the shared memory
// (the blocks of its part that the others reduce, and its result) are a
// rank's own writes of a round that stays in its cache, and cost about what
// a reduction does; only the copies out of the others' blocks pay the link's
// Beta. Charging Beta for every byte, as on a crowded host (where it times
// the rounds within 5%), made the model price the Shared all-reduce at
// twice its measured time with 2 ranks on 2 cores (8 MiB: 2.7 ms modelled,
// 1.16 measured; the ring 1.83 modelled, 2.49 measured), so that it chose
// the ring from 512 KiB, at 1.2-2.7x the Shared algorithm's time; on a
// 16-core machine the Shared all-reduce took 0.3-0.6x the ring's at 64 KiB
// to 4 MiB with 4 and 8 ranks too.
func (m Model) sharedRound(s shape, c, wait float64) float64 {
	b, g, p := m.Local.Beta*m.share(s.perHost), m.gamma(s.perHost), float64(s.p)
	if c < SharedScatter {
		return wait + c*b + (p-1)*c*g
	}
	if s.perHost <= m.Cores {
		return 2*wait + c*g + (p-1)/p*c*b + (p-1)/p*c*g
	}
	return 2*wait + (2*p-1)/p*c*b + (p-1)/p*c*g
}
