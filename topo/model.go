package topo

import (
	"math"
)

// Link is the cost of one message over a class of links: Alpha seconds of
// latency plus Beta seconds per byte.
type Link struct {
	Alpha float64 `json:"alpha_s"`         // seconds per message
	Beta  float64 `json:"beta_s_per_byte"` // seconds per byte
	// Pull is the smallest message that the receiver copies straight out
	// of the sender's memory (shared memory's single copy), or 0: a sender
	// of such messages to several receivers leaves them to copy in
	// parallel (spmd.Comm.SingleCopy).
	Pull float64 `json:"pull_bytes"`
}

// Time returns the modelled time of one message of n bytes.
func (k Link) Time(n float64) float64 { return k.Alpha + n*k.Beta }

// Model is the alpha-beta-gamma cost model of a job's machines: one Link per
// class (two ranks on the same host, on different hosts), the reduction cost
// Gamma, and the number of cores of a host, which bounds how many of its
// ranks make progress at once. A Model is a value; it is safe for
// concurrent use.
type Model struct {
	Local  Link    `json:"local"`            // between ranks of one host
	Remote Link    `json:"remote"`           // between ranks of different hosts
	Gamma  float64 `json:"gamma_s_per_byte"` // seconds per byte to reduce one float32 buffer into another
	Cores  int     `json:"cores"`            // cores of a host; more busy ranks than cores share them
	// Wake is the extra latency of a message per rank beyond the cores of
	// its host: an oversubscribed receiver has to be scheduled before it
	// sees its message.
	Wake float64 `json:"wake_s"`
	// Round is the latency of one message round of a collective algorithm
	// on a host whose ranks have a core each, as Probe times it (a round
	// of the message barrier, every rank sending and receiving), or 0 where
	// unmeasured. A ping-pong, one rank waiting while the other sends,
	// prices a round too low there: on 16 cores the rounds of every
	// message algorithm took 1.4-2.2 us at 2-16 ranks against a ping-pong's
	// 0.4-0.8 (gorun --tune's sweep).
	Round float64 `json:"round_s,omitempty"`

	// Whether Probe measured the link; else defaults.
	LocalProbed  bool `json:"local_probed"`
	RemoteProbed bool `json:"remote_probed"`
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
	for _, v := range []float64{m.Local.Alpha, m.Local.Beta, m.Local.Pull, m.Remote.Alpha, m.Remote.Beta, m.Remote.Pull, m.Gamma, m.Wake, m.Round} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return false
		}
	}
	return m.Cores > 0
}
