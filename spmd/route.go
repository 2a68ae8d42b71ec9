package spmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// router is the transport of a rank that reaches the ranks of its own host
// through shared memory and the others through TCP: each peer is served by
// exactly one of the two, fixed at Init, so MPI's ordering holds per peer.
type router struct {
	near, far transport.Transport
	local     []bool // by world rank: served by near
}

var (
	_ transport.Offerer    = served{}
	_ transport.Transport  = (*router)(nil)
	_ transport.Poller     = (*router)(nil)
	_ transport.TrySender  = (*router)(nil)
	_ transport.Starter    = (*router)(nil)
	_ transport.Puller     = (*router)(nil)
	_ transport.Withdrawer = (*router)(nil)
	_ transport.Sharer     = (*router)(nil)
)

// Route returns a transport that serves the peers marked in local (by
// world rank) with near and the others with far, as Init does with shared
// memory and TCP. Tests use it to build mixed jobs.
func Route(near, far transport.Transport, local []bool) transport.Transport {
	return &router{near: near, far: far, local: local}
}

func (r *router) pick(peer int) transport.Transport {
	if r.local[peer] {
		return r.near
	}
	return r.far
}

// Start starts both transports. Each reports the loss only of the peers it
// serves: TCP knows every rank, and its Close would report the host's
// ranks lost as well.
func (r *router) Start(h transport.Handler) error {
	if err := r.near.Start(served{h, r.local, true}); err != nil {
		return fmt.Errorf("shared memory: %w", err)
	}
	return r.far.Start(served{h, r.local, false})
}

func (r *router) Send(ctx context.Context, peer int, h transport.Header, payload []byte) error {
	return r.pick(peer).Send(ctx, peer, h, payload)
}

func (r *router) Watch(peer int) { r.pick(peer).Watch(peer) }

func (r *router) Close() error { return errors.Join(r.near.Close(), r.far.Close()) }

// The router drives the shared memory when a waiting goroutine polls; TCP
// keeps its own reader and writer goroutines (a TCP read per poll round
// would slow the shared memory's polling by a syscall per peer).
func (r *router) BeginPoll() {
	if p, ok := r.near.(transport.Poller); ok {
		p.BeginPoll()
	}
}

func (r *router) Poll() bool {
	p, ok := r.near.(transport.Poller)
	return ok && p.Poll()
}

func (r *router) EndPoll() {
	if p, ok := r.near.(transport.Poller); ok {
		p.EndPoll()
	}
}

// served passes a transport's reports to the engine, losses only for the
// peers that transport serves.
type served struct {
	transport.Handler
	local []bool
	near  bool
}

// Offer passes an offer on, to a handler that takes offers (the engine
// does), or else takes it at once as Buffer and Deliver would.
func (s served) Offer(peer int, h transport.Header, o transport.Offer) {
	if oh, ok := s.Handler.(transport.Offerer); ok {
		oh.Offer(peer, h, o)
		return
	}
	buf := s.Handler.Buffer(peer, h)
	if o.Take(buf) == nil { // else the link dropped (reported), or the sender withdrew it: nothing came
		s.Handler.Deliver(peer, h, buf)
	}
}

// Arrive passes a whole message on, to a handler that takes it whole
// (the engine does), or else as Buffer and Deliver would.
func (s served) Arrive(peer int, h transport.Header, a, b []byte) {
	if ah, ok := s.Handler.(transport.Arriver); ok {
		ah.Arrive(peer, h, a, b)
		return
	}
	buf := s.Handler.Buffer(peer, h)
	fill(buf, a, b)
	s.Handler.Deliver(peer, h, buf)
}

func (s served) Lost(peer int, err error) {
	if s.local[peer] == s.near {
		s.Handler.Lost(peer, err)
	}
}

// SingleCopy asks the shared memory about the ranks of this host.
func (r *router) SingleCopy(peer int) int {
	if pl, ok := r.near.(transport.Puller); ok && r.local[peer] {
		return pl.SingleCopy(peer)
	}
	return 0
}

// Shares asks the shared memory, when it serves every rank of ranks.
func (r *router) Shares(ranks []int) bool {
	sh, ok := r.near.(transport.Sharer)
	if !ok {
		return false
	}
	for _, peer := range ranks {
		if !r.local[peer] {
			return false
		}
	}
	return sh.Shares(ranks)
}

// Share maps the area in the shared memory.
func (r *router) Share(key string, ranks []int, size int) ([]byte, error) {
	if !r.Shares(ranks) {
		return nil, fmt.Errorf("ranks %v do not all share this host's memory", ranks)
	}
	return r.near.(transport.Sharer).Share(key, ranks, size)
}

// Unshare lets go of an area Share mapped.
func (r *router) Unshare(key string) error {
	sh, ok := r.near.(transport.Sharer)
	if !ok {
		return nil
	}
	return sh.Unshare(key)
}

// Withdraw takes back a started send from the transport that serves peer.
func (r *router) Withdraw(peer int, done transport.Done, cause error) bool {
	if w, ok := r.pick(peer).(transport.Withdrawer); ok {
		return w.Withdraw(peer, done, cause)
	}
	return false
}

// TrySend tries the transport that serves peer.
func (r *router) TrySend(peer int, h transport.Header, payload []byte) (bool, error) {
	if ts, ok := r.pick(peer).(transport.TrySender); ok {
		return ts.TrySend(peer, h, payload)
	}
	return false, nil
}

// StartSend starts the send on the transport that serves peer: single
// copy over the shared memory, a queued frame over TCP.
func (r *router) StartSend(peer int, h transport.Header, payload []byte, done transport.Done) (bool, error) {
	if st, ok := r.pick(peer).(transport.Starter); ok {
		return st.StartSend(peer, h, payload, done)
	}
	return false, nil
}
