package tcp

import "github.com/gorun-hpc/gorun/spmd/transport"

var (
	_ transport.Poller      = (*Transport)(nil)
	_ transport.PollLimiter = (*Transport)(nil)
)

// BeginPoll implements transport.Poller: until the matching EndPoll, the
// connections' reader goroutines leave the reading to Poll.
func (t *Transport) BeginPoll() {
	t.pollers.Add(1)
}

// Poll implements transport.Poller: it reads once from every up connection
// that no other goroutine is reading, delivers the frames that completes
// on the calling goroutine, and reports whether it completed a frame or
// found a peer lost. The reads never wait: a frame that arrived in part
// stays in its connection's decoder for the next Poll, or for the reader
// goroutine.
//
// Bytes of a frame still incomplete do not count as moving: the caller
// keeps polling while Poll reports progress, and a large message gains
// nothing from a goroutine spinning through its whole transfer, while the
// core it takes is one the sender needs. So a goroutine that waits for a
// large message soon leaves it to the reader goroutine, as before polling.
func (t *Transport) Poll() bool {
	moved := false
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		if r := p.rd.Load(); r != nil && r.poll() {
			moved = true
		}
	}
	return moved
}

// PollLimit is the largest message worth polling for: 64 KiB. A goroutine
// that waits for a larger one had better block (spmd's Request.Wait asks):
// the transfer, not the wake-up, sets the time, and a goroutine polling
// through it takes a core that the sender and the reader need.
func (t *Transport) PollLimit() int { return pollLimit }

const pollLimit = 64 << 10

// EndPoll implements transport.Poller. The last poller to leave drains
// every connection: a reader goroutine that found pollers at work waits for
// readiness, which the netpoller signals only for data that arrives later,
// so what is in the sockets now is the drain's to read (see reader).
func (t *Transport) EndPoll() {
	if t.pollers.Add(-1) > 0 {
		return
	}
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		if r := p.rd.Load(); r != nil {
			r.drain()
		}
	}
}
