package topo

import (
	"math"
)

// Link is the cost of one message over a class of links: Alpha seconds of
// latency plus Beta seconds per byte.
type Link struct {
	Alpha float64 // seconds per message
	Beta  float64 // seconds per byte
	// Pull is the smallest message that the receiver copies straight out
	// of the sender's memory (shared memory's single copy), or 0: a sender
	// of such messages to several receivers leaves them to copy in
	// parallel (spmd.Comm.SingleCopy).
	Pull float64
}

// Time returns the modelled time of one message of n bytes.
func (k Link) Time(n float64) float64 { return k.Alpha + n*k.Beta }

// Model is the alpha-beta-gamma cost model of a job's machines: one Link per
// class (two ranks on the same host, on different hosts), the reduction cost
// Gamma, and the number of cores of a host, which bounds how many of its
// ranks make progress at once. A Model is a value; it is safe for
// concurrent use.
type Model struct {
	Local  Link    // between ranks of one host
	Remote Link    // between ranks of different hosts
	Gamma  float64 // seconds per byte to reduce one float32 buffer into another
	Cores  int     // cores of a host; more busy ranks than cores share them
	// Wake is the extra latency of a message per rank beyond the cores of
	// its host: an oversubscribed receiver has to be scheduled before it
	// sees its message.
	Wake float64

	LocalProbed, RemoteProbed bool // whether Probe measured the link; else defaults
}

// DefaultModel returns constants for a typical machine: TCP over loopback
// between ranks of one host, a 10 Gb/s Ethernet between hosts, a reduction
// at a few GB/s, and as many cores as ranks need.
func DefaultModel() Model {
	return Model{
		Local:  Link{Alpha: 15e-6, Beta: 1.0 / 3e9},
		Remote: Link{Alpha: 50e-6, Beta: 1.0 / 1.1e9},
		Gamma:  1.0 / 4e9,
		Cores:  64,
	}
}

// Valid reports whether every constant is a finite non-negative number and
// Cores is positive.
func (m Model) Valid() bool {
	for _, v := range []float64{m.Local.Alpha, m.Local.Beta, m.Local.Pull, m.Remote.Alpha, m.Remote.Beta, m.Remote.Pull, m.Gamma, m.Wake} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return false
		}
	}
	return m.Cores > 0
}

// Choose returns the cheapest algorithm for coll on p ranks laid out as lay
// moving bytes bytes (counted as Choose in this package counts them). Ties
// go to the algorithm listed first by Algos.
func (m Model) Choose(coll Collective, p, bytes int, lay Layout) Algo {
	lay = fit(p, lay)
	best, bestCost := Algo(""), math.Inf(1)
	for _, a := range Algos(coll) {
		if c := m.cost(coll, a, p, float64(bytes), lay); c < bestCost || best == "" {
			best, bestCost = a, c
		}
	}
	return best
}

// Cost returns the modelled seconds of one call of coll by algo on p ranks
// laid out as lay, moving bytes bytes. It is +Inf for an algorithm that
// does not apply (Hierarchical on one host, say). lay must describe p
// ranks; the zero Layout stands for p ranks on one host.
func (m Model) Cost(coll Collective, algo Algo, p, bytes int, lay Layout) float64 {
	if !Applies(coll, algo) {
		return math.Inf(1)
	}
	return m.cost(coll, algo, p, float64(bytes), fit(p, lay))
}

// fit returns lay, or one host of p ranks when lay does not describe p ranks.
func fit(p int, lay Layout) Layout {
	if lay.Size() == p {
		return lay
	}
	return Uniform(1, p)
}

// Range is a span of sizes, From to To bytes inclusive, over which one
// algorithm is chosen.
type Range struct {
	From, To int
	Algo     Algo
}

// TableMin and TableMax bound the sizes Table reports.
const (
	TableMin = 8
	TableMax = 64 << 20
)

// Table returns the algorithm the model chooses for coll on p ranks laid
// out as lay, as ranges over the powers of two from TableMin to TableMax
// bytes: each Range runs from the first size of a run of equal choices to
// its last.
func (m Model) Table(coll Collective, p int, lay Layout) []Range {
	var t []Range
	for n := TableMin; n <= TableMax; n *= 2 {
		a := m.Choose(coll, p, n, lay)
		if len(t) > 0 && t[len(t)-1].Algo == a {
			t[len(t)-1].To = n
			continue
		}
		t = append(t, Range{From: n, To: n, Algo: a})
	}
	return t
}
