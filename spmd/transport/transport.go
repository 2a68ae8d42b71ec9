package transport

import (
	"context"
	"errors"
	"fmt"
)

// ErrPeerLost is wrapped by every error caused by a peer that died, closed
// its side or became unreachable. spmd.ErrPeerLost is the same value.
var ErrPeerLost = errors.New("peer lost")

// ErrClosed is returned by calls on a transport that has been closed.
// spmd.ErrClosed is the same value.
var ErrClosed = errors.New("closed")

// ErrWithdrawn is returned by Offer.Take when the message's sender took
// it back before anyone began to copy it (Withdrawer): the receive that
// matched it fails, and the link stays up.
var ErrWithdrawn = errors.New("the sender withdrew the message before it was taken (its send's context ended)")

// Header describes one framed message.
type Header struct {
	Comm uint32 // communicator id; 0 is the world
	Tag  int32  // user tags are >= 0, negative tags are reserved for collectives
	Len  int    // payload length in bytes
}

// Handler receives what a Transport reads. spmd's matching engine implements
// it. A Transport calls it from its own goroutines: concurrently for
// different peers, but strictly in arrival order for any one peer.
type Handler interface {
	// Buffer returns the slice, exactly h.Len bytes long, that the payload of
	// the message h from peer is to be read into: the posted receive's own
	// buffer when one matches, so that large messages land without a copy.
	Buffer(peer int, h Header) []byte
	// Deliver hands over the message once its payload fills the slice that
	// Buffer returned.
	Deliver(peer int, h Header, payload []byte)
	// Lost reports that peer is gone; err wraps ErrPeerLost and names the
	// peer. A Transport reports each peer at most once and calls neither
	// Buffer nor Deliver for it afterwards, except to finish a message whose
	// Buffer call came before (then Deliver is not called at all).
	Lost(peer int, err error)
}

// Offer is a message its sender left in its own memory (shared memory's
// single copy), which the receiver copies when it chooses: straight into
// the buffer of the receive that matches it, even when the message came
// before that receive was posted.
type Offer interface {
	// Take copies the first len(dst) bytes of the message into dst (dst is
	// at most the message's length) and tells the sender that its send is
	// done; the Offer must not be used after. An error wraps ErrPeerLost
	// when the sender is gone or withdrew the message.
	Take(dst []byte) error
	// Release gives up an Offer that will not be taken, as when its peer
	// is lost or the receiver closes or frees its communicator: the
	// message is dropped, and its sender's send completes as though it
	// had been taken. The Offer must not be used after.
	Release()
}

// Offerer is a Handler that can keep offers until a receive matches them.
// A Transport that makes offers gives them to Offer, in place of Buffer
// and Deliver, when its Handler implements Offerer; it calls Offer as it
// would Buffer, in arrival order for each peer.
type Offerer interface {
	Handler
	// Offer hands over the message h from peer as o, to be taken at once
	// or kept (in order with the peer's other messages) until a receive
	// matches it.
	Offer(peer int, h Header, o Offer)
}

// Arriver is implemented by a Handler that takes a small message whole,
// in one call where Buffer and Deliver are two (each takes the engine's
// lock). A Transport that has a message's payload complete in its own
// memory, as a shared-memory ring has a frame written whole, may give it
// to Arrive in place of Buffer and Deliver when its Handler implements
// Arriver, in arrival order with the peer's other messages. The payload
// is a followed by b (b is empty unless it wraps around a ring's end);
// Arrive has copied them when it returns.
type Arriver interface {
	Handler
	Arrive(peer int, h Header, a, b []byte)
}

// Puller is implemented by a transport whose receivers copy large
// messages straight out of the sender's memory (shared memory's single
// copy), so that a sender's messages to several peers are copied by them
// in parallel.
type Puller interface {
	// SingleCopy returns the smallest message to peer that peer copies so,
	// or 0 when none is.
	SingleCopy(peer int) int
}

// Transport moves framed messages between the ranks of one job. Send may
// be called concurrently for different peers; spmd never calls it
// concurrently for the same peer, and messages to one peer arrive in the
// order they were sent.
type Transport interface {
	// Start begins delivering incoming messages to h. It is called once,
	// before any Send.
	Start(h Handler) error
	// Send writes one message to peer (never the transport's own rank) and
	// returns once payload may be reused. Errors caused by the peer wrap
	// ErrPeerLost.
	Send(ctx context.Context, peer int, h Header, payload []byte) error
	// Watch asks the transport to notice, and report through Lost, the loss
	// of peer even when nothing has been sent to it yet: spmd calls it when a
	// receive from peer is posted. It must not block.
	Watch(peer int)
	// Close releases the transport and reports every peer not yet lost as
	// lost with ErrClosed. It is idempotent and waits for its goroutines.
	Close() error
}

// Poller is implemented by a transport whose receiving side the goroutine
// that waits for a message can drive itself, as MPI progresses inside
// MPI_Wait: the message is delivered on the waiting goroutine, with no hand
// off from a receiving goroutine, which on a host with more busy threads
// than cores costs an OS scheduling delay per message.
type Poller interface {
	// BeginPoll announces a goroutine that will call Poll until EndPoll;
	// while one polls, the transport's own receiver keeps out of its way.
	BeginPoll()
	// Poll delivers what has arrived, through the Handler, on the calling
	// goroutine, and reports whether anything moved. It returns false at
	// once when another goroutine is polling.
	Poll() bool
	// EndPoll ends the announcement; after it the transport's receiver
	// again delivers everything, including what arrived meanwhile.
	EndPoll()
}

// PollLimiter is implemented by a Poller for which polling pays only for
// small messages when the host has more ranks than cores: for a larger one
// the transfer, not a wake-up, sets the time, and a goroutine polling
// through it takes a core that another rank needs. On such a host spmd
// waits for messages longer than PollLimit bytes without polling; with a
// core per rank it polls for every message.
type PollLimiter interface {
	PollLimit() int
}

// TrySender is implemented by a transport that can sometimes send a
// message at once without blocking, as a shared-memory ring with room
// can. spmd's Isend tries it first, so that a small non-blocking send
// needs no goroutine of its own.
type TrySender interface {
	// TrySend sends the message if that needs no waiting and reports
	// whether it did; false (with a nil error) means: use Send. Its calls
	// for one peer are ordered with Send's as Send's are.
	TrySend(peer int, h Header, payload []byte) (bool, error)
}

// Starter is implemented by a transport that can hand a message over
// without waiting for the peer to take it, as shared memory does when the
// receiver copies straight from the sender's memory: the send completes
// later, through done, and the sends after it need not wait.
type Starter interface {
	// StartSend starts sending the message and reports whether it did;
	// false (with a nil error) means: use Send. Once it has started, the
	// next message to peer may be sent at once; it arrives after this one.
	// done.SendDone is called exactly once, from any goroutine, when
	// payload may be reused (nil) or the peer is lost (an error wrapping
	// ErrPeerLost or ErrClosed); until then the caller must leave payload
	// alone. Its calls for one peer are ordered with Send's as Send's are.
	StartSend(peer int, h Header, payload []byte, done Done) (bool, error)
}

// Withdrawer is a Starter that can take back a started send that its
// receiver has not begun to take, as when the sender's context ends.
type Withdrawer interface {
	// Withdraw takes back the started send to peer whose Done is done,
	// unless its payload is being or has been taken, and reports whether
	// it did; done.SendDone is then called with an error wrapping cause.
	// The message's receiver may already have matched it: that receive
	// fails with ErrWithdrawn, and the link stays up. A send half-way
	// through its frame is either finished from a copy of the rest and
	// completed as sent (Withdraw reports false), or it drops the link.
	Withdraw(peer int, done Done, cause error) bool
}

// Sharer is implemented by a transport that can map memory shared by
// ranks of one host, as shared memory can. Collectives of small messages
// run through it without messages at all: every rank publishes its part
// and reads the others' (package prims, algorithm "flat").
type Sharer interface {
	// Shares reports whether Share can map memory for the world ranks in
	// ranks: all of them on this host and reached through the transport.
	Shares(ranks []int) bool
	// Share maps size bytes shared by the world ranks in ranks (this one
	// among them), named key: every rank that passes the same key and
	// ranks gets the same memory, zero until someone writes it. size must
	// be the same for every rank. The memory stays mapped until Unshare
	// or the process exits, even after the transport closes, so that a
	// rank still reading it then reads stale bytes instead of faulting.
	Share(key string, ranks []int, size int) ([]byte, error)
	// Unshare lets go of the memory Share mapped under key: the shared
	// pages go once every rank has let go of them or exited. The
	// addresses stay readable (as zeros), so that a late reader does not
	// fault; a key not mapped is no error.
	Unshare(key string) error
}

// Done is told when a started send completes.
type Done interface {
	SendDone(err error)
}

// PeerError names the peer behind a failure. It unwraps to Err, which wraps
// ErrPeerLost (or ErrClosed).
type PeerError struct {
	Rank int    // the peer's world rank
	Addr string // where it was reached, if known
	Err  error
}

func (e *PeerError) Error() string {
	if e.Addr != "" {
		return fmt.Sprintf("rank %d (%s): %v", e.Rank, e.Addr, e.Err)
	}
	return fmt.Sprintf("rank %d: %v", e.Rank, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// Lost builds the error a transport reports for a lost peer: it names the
// rank and address and wraps both ErrPeerLost and the cause.
func Lost(rank int, addr string, cause error) error {
	if cause == nil || errors.Is(cause, ErrPeerLost) {
		return &PeerError{Rank: rank, Addr: addr, Err: orLost(cause)}
	}
	return &PeerError{Rank: rank, Addr: addr, Err: fmt.Errorf("%w: %w", ErrPeerLost, cause)}
}

func orLost(err error) error {
	if err == nil {
		return ErrPeerLost
	}
	return err
}
