package topo

// The costs of a host with more ranks than cores that the rounds of
// cost.go leave out: the cores bound what a collective's messages take
// (crowdedWork), and the tree all-reduce's large rounds take longer than
// their bytes say (crowdedWhole).

// crowdedWork is the least time the messages of a collective take on one
// host with more ranks than cores: each message costs its sender and its
// receiver about alpha of a core, and the host's cores do Cores of that at
// once. The rounds (cost.go) price latency and bytes as if the messages of a
// round overlapped, which on such a host they cannot all do: over TCP with
// 4 and 8 ranks on 2 cores, 8-byte to 8 KiB calls took about messages x
// 2 alpha / cores (all-gather at np 8: recursive doubling's 24 messages
// 160-230 us, the linear burst's 56 300-480 us, alpha 9.4 us), where the
// rounds priced the burst below recursive doubling. Replayed against
// bench/results/choice (tcp-a to tcp-d, shm-a): over TCP 201 of 306 sizes
// within 15% of the fastest without it, 248 with it (1.4 alpha: 230, 3
// alpha: 253); shared memory unchanged (138 of 141), where the Shared
// algorithms, which it leaves alone, win on such hosts. tcp-e, run with
// it: 380 of 492 over the five TCP runs, against 289 without it.
func (m Model) crowdedWork(coll Collective, algo Algo, s shape) float64 {
	if s.hosts != 1 || s.perHost <= m.Cores {
		return 0
	}
	return messages(coll, algo, s.p) * 2 * m.Local.Alpha / float64(m.Cores)
}

// messages is how many point-to-point messages a collective of p ranks
// sends when its buffer is small (one segment a block); none for the
// Shared algorithms, which send none.
func messages(coll Collective, algo Algo, p int) float64 {
	P, q := float64(p), float64(pow2(p))
	lgq := float64(lg(pow2(p)))
	fold := 2 * (P - q) // the extra ranks' data in, and their result back
	switch algo {
	case Ring:
		switch coll {
		case AllReduce:
			return 2 * P * (P - 1) // reduce-scatter, then all-gather
		case Broadcast:
			return P - 1 // a chain
		case Reduce:
			return P*(P-1) + P - 1 // reduce-scatter, then the blocks to the root
		}
		return P * (P - 1)
	case Linear:
		switch coll {
		case AllGather, ReduceScatter, AllToAll:
			return P * (P - 1)
		case AllReduce:
			return 2 * (P - 1) // to the root, and back
		}
		return P - 1
	case Tree:
		if coll == AllReduce || coll == Barrier {
			return 2 * (P - 1) // up the tree and down again
		}
		return P - 1
	case RecursiveDoubling:
		if coll == Barrier {
			return P * float64(lg(p)) // dissemination
		}
		return q*lgq + fold
	case Rabenseifner:
		switch coll {
		case AllReduce:
			return 2*q*lgq + fold // halving, then doubling
		case Reduce:
			return q*lgq + q - 1 + (P - q) // halving, then the blocks up a tree
		}
		return q*lgq + fold
	}
	return 0
}

// crowdedWhole is the extra cost, in the tree all-reduce on a host with
// more ranks than cores, of each whole message of b bytes its reduction
// tree moves: past WholeOverlap bytes its bytes cost beta once more,
// unless the receiver copies it straight out of the sender's memory
// (Link.Pull). Measured with bench/choice.sh over TCP only
// (GORUN_TRANSPORT=tcp) at 4 ranks on 2 cores, two runs: the tree
// all-reduce took 1.2-1.5x the time of Rabenseifner or the ring at 1-4
// MiB, and was the fastest, or within 15% of it, at 16-512 KiB, where the
// model chose it too; priced without this, it was chosen up to 4 MiB. Why
// is not known: the tree reduce alone (collbench --op reduce, same host,
// 5 rounds) was the fastest at 1-16 MiB, ahead of the ring by 10-33%, so
// Reduce's trees are not charged it.
func (m Model) crowdedWhole(s shape, cross bool, b float64, busy int) float64 {
	if s.perHost <= m.Cores || m.pulls(cross, b) {
		return 0
	}
	return max(0, b-WholeOverlap) * m.beta(s, cross, busy)
}

// WholeOverlap is how much of a whole message crowdedWhole leaves at one
// beta per byte. Replayed (bench/replay) against the kept runs of
// bench/choice.sh in bench/results/choice, tcp-a and tcp-b over TCP
// (all-reduce at np 4 twice and np 8, broadcast at np 4 and 8) and shm-a
// over shared memory (all-reduce, broadcast and all-gather at np 4 and
// 8): all-reduce over TCP at np 4 within 15% of the fastest at 38 of 48
// sizes without it, 42 with it from 512 KiB (40 from 256 KiB, 41 from
// 1 MiB); nothing else moved.
const WholeOverlap = 512 << 10
