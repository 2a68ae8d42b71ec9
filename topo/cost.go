package topo

// The building blocks of the costs of collective algorithms: what a
// message, a round of messages and a reduction cost on a Shape of ranks.
// Each algorithm of package prims adds them up, round by round, beside its
// code (DESIGN.md, "Choosing algorithms"). They carry the refinements that
// the measurements asked for:
//
//   - a round that crosses hosts pays the Remote link; one that stays on
//     every host pays the Local one. For the distance-based schedules the
//     Layout knows which rounds cross (XorCrosses, TreeCrosses);
//   - a host whose busy ranks outnumber its cores shares them: the bytes of
//     a round cost Beta times (message endpoints on the busiest host)/Cores
//     when that exceeds 1 (a ping-pong has 2 endpoints), and a reduction
//     costs Gamma times (reducing ranks)/Cores;
//   - on one host with more ranks than cores, no collective costs less than
//     the core time its messages take (CrowdedWork, crowded.go), whatever
//     its rounds add up to.

// Shape is what the costs need to know about the ranks of a call: how
// many, on how many hosts, the most on one host, and their Layout.
type Shape struct {
	P, Hosts, PerHost int
	Layout            Layout
}

// ShapeOf returns the shape of p ranks laid out as lay, or of p ranks on
// one host when lay does not describe p ranks (the zero Layout, say).
func ShapeOf(p int, lay Layout) Shape {
	if lay.Size() != p {
		lay = Uniform(1, p)
	}
	return Shape{P: p, Hosts: len(lay.Hosts), PerHost: lay.MaxPerHost(), Layout: lay}
}

// Alpha is the latency of one message over the link class (Link), grown
// by Wake for every rank of the busiest host of s beyond its cores.
func (m Model) Alpha(s Shape, cross bool) float64 {
	return m.AlphaBusy(s, cross, s.PerHost)
}

// AlphaBusy is Alpha for a round in which busy ranks of the busiest host
// take part: a rank waits its turn for a core only when the round keeps
// more ranks busy than the host has cores. Measured on 2 cores with 4 and
// 8 ranks: schedules that keep few ranks busy per round (a binomial tree's
// later rounds, a root sending to each rank in turn) beat those that keep
// every rank busy in every round (recursive doubling, Rabenseifner) at all
// but the smallest sizes, which charging every round the whole host's
// excess could not show.
//
// A round of messages over the Local link costs at least Round, where
// Probe measured one: what the algorithms' rounds cost on a host whose
// ranks have a core each, which a ping-pong's alpha misses.
func (m Model) AlphaBusy(s Shape, cross bool, busy int) float64 {
	a := m.Link(cross).Alpha
	if !cross {
		a = max(a, m.Round)
	}
	return a + m.wakes(s, busy)
}

// Handoff is the latency of a wait on one host in which busy ranks take
// part and no message travels (a Shared algorithm's: a cache line stored,
// and seen): the Local link's alpha, grown by Wake beyond the cores as a
// message's is, without Round.
func (m Model) Handoff(s Shape, busy int) float64 {
	return m.Local.Alpha + m.wakes(s, busy)
}

// wakes is Wake for every busy rank of the busiest host of s beyond its
// cores.
func (m Model) wakes(s Shape, busy int) float64 {
	return m.Wake * float64(max(0, min(busy, s.PerHost)-m.Cores))
}

// Link is the Remote link for a round that crosses hosts, else the Local one.
func (m Model) Link(cross bool) Link {
	if cross {
		return m.Remote
	}
	return m.Local
}

// Beta is the seconds per byte of a round over the link class with busy
// message endpoints on the busiest host of s.
func (m Model) Beta(s Shape, cross bool, busy int) float64 {
	b := m.Link(cross).Beta * m.Share(busy)
	if s.PerHost > m.Cores {
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

// Copiers is how many of busy message endpoints copy bytes of a message
// of b bytes: all of them, except where the receiver copies straight out
// of the sender's memory (Link.Pull) and the sender only waits.
func (m Model) Copiers(cross bool, b float64, busy int) int {
	if m.Pulls(cross, b) {
		return (busy + 1) / 2
	}
	return busy
}

// Pulls reports whether a message of b bytes over the link class is copied
// by its receiver alone (Link.Pull).
func (m Model) Pulls(cross bool, b float64) bool {
	k := m.Link(cross)
	return k.Pull > 0 && b >= k.Pull
}

// GammaBusy is the seconds per byte of a reduction done by busy ranks of
// one host at once.
func (m Model) GammaBusy(busy int) float64 { return m.Gamma * m.Share(busy) }

// Share is how much slower work runs when busy ranks share a host's cores.
func (m Model) Share(busy int) float64 {
	return max(1, float64(busy)/float64(max(1, m.Cores)))
}

// Step is one round: a message of bytes bytes, red of which the receiver
// reduces, with busy endpoints and reducers on the busiest host.
func (m Model) Step(s Shape, cross bool, bytes, red float64, busy, reducers int) float64 {
	return m.AlphaBusy(s, cross, busy) + m.Copies(cross, bytes)*bytes*m.Beta(s, cross, m.Copiers(cross, bytes, busy)) + red*m.GammaBusy(reducers)
}

// Copies is how many times Beta a message of b bytes over the link class
// costs: twice where Probe fitted the Local link's Beta to single copies
// (its large ping-pongs were pulled, Link.Pull at most PulledProbe) and
// the message is not pulled, since the transport's rings copy it in and
// out; once otherwise. On 16 cores the ring and recursive-doubling
// all-gathers of 128-512 KiB at np 4 and 8 took 1.5-2.5x the time that one
// copy priced, and the model chose them over the Shared all-gather, which
// ran 2x faster. Replayed (bench/replay), against one copy: the 16-core
// sweeps 987 -> 999 of 1038 sizes within 15% of the fastest, this VM's
// 341 -> 337 of 356, the kept choice runs 872 -> 871 of 1039.
func (m Model) Copies(cross bool, b float64) float64 {
	if cross || m.Local.Pull <= 0 || m.Local.Pull > PulledProbe || m.Pulls(cross, b) {
		return 1
	}
	return 2
}

// PulledProbe is the smallest message of Probe's bandwidth ping-pongs: a
// Local link that pulls messages from this size on (Link.Pull) had its
// Beta fitted to single copies.
const PulledProbe = 256 << 10

// BurstGap is what each message after the first of a burst adds, as a
// fraction of the link's alpha: posting a message costs its sender a part
// of the one-way latency (LogP's o against L), the rest overlaps.
const BurstGap = 0.25

// Burst is one round in which every rank posts its p-1 messages of b bytes
// (one to every other rank) and its p-1 receives at once, reducing red
// bytes of each message: the wake-up latency is paid once, each further
// message costs BurstGap of alpha, and the bytes cost what a ring's p-1
// steps move. The linear all-gather, reduce-scatter and all-to-all run
// so; the model used to charge them the ring's p-1 rounds. Replayed
// against five kept runs of bench/choice.sh (bench/replay, 705 sizes of
// all-reduce, broadcast and all-gather at 4 and 8 ranks on 2 cores): 580
// choices within 15% of the fastest against 571, the same with a gap of
// half alpha, 571 with a whole alpha.
func (m Model) Burst(s Shape, b, red float64) float64 {
	cross := s.Hosts > 1
	busy := 2 * s.PerHost
	k := float64(s.P - 1)
	copies := 2.0
	if m.Pulls(cross, b) {
		copies = 1
	}
	return m.AlphaBusy(s, cross, busy) + (k-1)*BurstGap*m.Link(cross).Alpha +
		k*(copies*b*m.Beta(s, cross, m.Copiers(cross, b, busy))+red*m.GammaBusy(s.PerHost)+m.Unsegmented(s, cross, b, busy))
}

// Unsegmented is the extra cost of moving a message of b bytes in one
// piece: past the first Overlap bytes, the sender's copy in and the
// receiver's copy out follow each other instead of overlapping as a
// segmented pipeline's do, so those bytes cost beta once more. Measured
// with bench/choice.sh on 2 cores: the segmented ring all-gather overtook
// recursive doubling from 64-128 KiB, which one beta per byte could not
// show.
func (m Model) Unsegmented(s Shape, cross bool, b float64, busy int) float64 {
	if m.Pulls(cross, b) {
		return 0 // one copy, by the receiver, straight out of the sender's memory
	}
	return max(0, b-Overlap) * m.Beta(s, cross, busy)
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
