package topo

// The costs of a host with more ranks than cores that the rounds of an
// algorithm leave out: the cores bound what a collective's messages take
// (CrowdedWork), and the tree all-reduce's large rounds take longer than
// their bytes say (CrowdedWhole).

// CrowdedWork is the least time that a collective sending messages
// point-to-point messages (when its buffer is small: one segment a block)
// takes on the ranks of s when they are on one host with more ranks than
// cores, else 0: each message costs its sender and its receiver about
// alpha of a core, and the host's cores do Cores of that at once. The
// rounds price latency and bytes as if the messages of a round overlapped,
// which on such a host they cannot all do: over TCP with 4 and 8 ranks on
// 2 cores, 8-byte to 8 KiB calls took about messages x 2 alpha / cores
// (all-gather at np 8: recursive doubling's 24 messages 160-230 us, the
// linear burst's 56 300-480 us, alpha 9.4 us), where the rounds priced the
// burst below recursive doubling. Replayed against bench/results/choice
// (tcp-a to tcp-d, shm-a): over TCP 201 of 306 sizes within 15% of the
// fastest without it, 248 with it (1.4 alpha: 230, 3 alpha: 253); shared
// memory unchanged (138 of 141), where the Shared algorithms, which send
// no messages, win on such hosts. tcp-e, run with it: 380 of 492 over the
// five TCP runs, against 289 without it.
func (m Model) CrowdedWork(s Shape, messages float64) float64 {
	if s.Hosts != 1 || s.PerHost <= m.Cores {
		return 0
	}
	return messages * 2 * m.Local.Alpha / float64(m.Cores)
}

// CrowdedWhole is the extra cost, in the tree all-reduce on a host with
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
func (m Model) CrowdedWhole(s Shape, cross bool, b float64, busy int) float64 {
	if s.PerHost <= m.Cores || m.Pulls(cross, b) {
		return 0
	}
	return max(0, b-WholeOverlap) * m.Beta(s, cross, busy)
}

// WholeOverlap is how much of a whole message CrowdedWhole leaves at one
// beta per byte. Replayed (bench/replay) against the kept runs of
// bench/choice.sh in bench/results/choice, tcp-a and tcp-b over TCP
// (all-reduce at np 4 twice and np 8, broadcast at np 4 and 8) and shm-a
// over shared memory (all-reduce, broadcast and all-gather at np 4 and
// 8): all-reduce over TCP at np 4 within 15% of the fastest at 38 of 48
// sizes without it, 42 with it from 512 KiB (40 from 256 KiB, 41 from
// 1 MiB); nothing else moved.
const WholeOverlap = 512 << 10
