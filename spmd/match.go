package spmd

import (
	"fmt"
	"sync"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// matchKey is what a receive matches: communicator, source world rank, tag.
// There are no wildcards, so one FIFO per key gives MPI's ordering rule.
type matchKey struct {
	comm uint32
	src  int
	tag  int32
}

type queue struct {
	posted fifo[*Request] // receives in posting order
	unexp  fifo[*inbox]   // messages in arrival order
}

// engine matches incoming messages with posted receives for one rank and
// keeps sends to each peer in program order. It implements
// transport.Handler. Its methods are safe for concurrent use.
type engine struct {
	self   int
	tr     transport.Transport
	poller transport.Poller // tr, if waiting goroutines can drive it

	// crowded says the host has more ranks than cores: a polling
	// goroutine then yields its core to the other ranks.
	crowded bool
	// report, when set, tells gorun of each peer lost (Lost), once per
	// peer: gorun names the rank whose failure came first by it.
	report func(peer int)

	selfMu sync.Mutex // serializes sends to ourselves

	mu sync.Mutex
	// protects following
	queues map[matchKey]*queue
	spare  []*queue // emptied queues, reused so matching allocates nothing
	// recent holds the queues of recently matched keys, one slot per
	// hash of the key (recentSlot): a message and its receive, a loop of
	// exchanges with one peer, and a window of messages with different
	// tags find their queue without the map's hashing. It kept only the
	// last key: a window of 64 8-byte Isends and Irecvs each way at np 2,
	// 64 tags, spent 8% of its time hashing keys. With 64 slots the 64
	// keys of that window still collided (5% hashing); 256 slots took its
	// exchange from 18.3-18.6 us to 17.2-18.2 at np 2, and from 111-146
	// to 93-120 at np 4 (192 keys; bench/window, 3-4 runs each in turns).
	// 1024 did no better.
	recent   [recentSlots]recentQueue
	inflight []any   // per peer: the *Request or *inbox being filled
	lost     []error // per peer: why it is gone
	watched  []bool  // per peer: Watch called
	senders  []sender
	closed   error
	// gone holds, for both contexts of every communicator freed on this
	// rank (Comm.Free), the error its calls fail with. Its messages are
	// dropped as they arrive.
	gone map[uint32]error
}

var _ transport.Handler = (*engine)(nil)

func newEngine(self, size int, tr transport.Transport) *engine {
	poller, _ := tr.(transport.Poller)
	return &engine{
		self:     self,
		tr:       tr,
		poller:   poller,
		queues:   make(map[matchKey]*queue),
		inflight: make([]any, size),
		lost:     make([]error, size),
		watched:  make([]bool, size),
		senders:  make([]sender, size),
	}
}

// recentQueue is a slot of engine.recent: a key and its queue, or nil.
type recentQueue struct {
	key matchKey
	q   *queue
}

// recentSlots is the number of slots in engine.recent.
const (
	recentBits  = 8
	recentSlots = 1 << recentBits
)

// recentSlot returns the slot of engine.recent that k may be kept in: the
// top bits of a multiplicative hash.
func recentSlot(k matchKey) int {
	h := uint32(k.tag)*0x9E3779B1 + uint32(k.src)*0x85EBCA6B + k.comm*0xC2B2AE35
	return int(h >> (32 - recentBits))
}

// find returns k's queue, or nil.
func (e *engine) find(k matchKey) *queue {
	r := &e.recent[recentSlot(k)]
	if r.q != nil && r.key == k {
		return r.q
	}
	q := e.queues[k]
	if q != nil {
		*r = recentQueue{k, q}
	}
	return q
}

// forget drops k, whose queue q leaves the map, from engine.recent.
func (e *engine) forget(k matchKey, q *queue) {
	if r := &e.recent[recentSlot(k)]; r.q == q {
		*r = recentQueue{}
	}
}

// queue returns k's queue, making it if need be.
func (e *engine) queue(k matchKey) *queue {
	q := e.find(k)
	if q == nil {
		if n := len(e.spare); n > 0 {
			q = e.spare[n-1]
			e.spare = e.spare[:n-1]
		} else {
			q = &queue{}
		}
		e.queues[k] = q
		e.recent[recentSlot(k)] = recentQueue{k, q}
	}
	return q
}

// keptQueues is how many queues the engine keeps in its map after they
// empty: the keys of a program's exchanges recur (prims has a tag per
// collective and phase), and deleting and adding them again cost two of
// the four map operations of every message. Beyond it, an emptied queue
// goes at once, so tags used once do not accumulate.
const keptQueues = 1024

// tidy drops an emptied queue if the map holds more than keptQueues.
func (e *engine) tidy(k matchKey, q *queue) {
	if len(e.queues) > keptQueues && q.posted.len() == 0 && q.unexp.len() == 0 {
		delete(e.queues, k)
		e.forget(k, q)
		if len(e.spare) < 64 {
			e.spare = append(e.spare, q)
		}
	}
}

// popPosted takes the first receive posted for k off its queue, or
// returns nil. e.mu is held.
func (e *engine) popPosted(k matchKey) *Request {
	q := e.find(k)
	if q == nil || q.posted.len() == 0 {
		return nil
	}
	r := q.posted.pop()
	e.tidy(k, q)
	return r
}

// Buffer implements transport.Handler.
func (e *engine) Buffer(peer int, h transport.Header) []byte {
	k := matchKey{h.Comm, peer, h.Tag}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.popPosted(k); r != nil {
		r.stage = reqClaimed
		if h.Len <= len(r.buf) {
			e.inflight[peer] = r
			return r.buf[:h.Len]
		}
		// Too long for the posted buffer: take it aside, fail the receive.
		in := newInbox(h.Len)
		in.waiter = r
		e.inflight[peer] = in
		return in.buf
	}
	in := newInbox(h.Len)
	if e.gone[h.Comm] != nil { // dropped by Deliver
		e.inflight[peer] = in
		return in.buf
	}
	q := e.queue(k)
	q.unexp.push(in)
	e.inflight[peer] = in
	return in.buf
}

// Deliver implements transport.Handler.
func (e *engine) Deliver(peer int, h transport.Header, payload []byte) {
	e.mu.Lock()
	x := e.inflight[peer]
	e.inflight[peer] = nil
	var w *Request
	switch v := x.(type) {
	case *Request:
		v.stage = reqDone
		e.mu.Unlock()
		v.finish(h.Len, nil)
		return
	case *inbox:
		v.complete = true
		w = v.waiter
		if w == nil && len(e.gone) > 0 && e.gone[h.Comm] != nil {
			v.recycle() // for a communicator freed here: no receive takes it
		}
	}
	e.mu.Unlock()
	if w != nil {
		in := x.(*inbox)
		n, err := fill(w.buf, in.buf, nil)
		in.recycle()
		w.finish(n, err)
	}
}

// Arrive implements transport.Arriver: a message whose payload is a and
// then b goes into the receive that matches it, or into an early
// message's inbox, under one hold of the lock where Buffer and Deliver
// take it twice. Transports give it only small messages: an early one is
// copied while the lock is held.
func (e *engine) Arrive(peer int, h transport.Header, a, b []byte) {
	k := matchKey{h.Comm, peer, h.Tag}
	e.mu.Lock()
	if r := e.popPosted(k); r != nil {
		r.stage = reqDone
		e.mu.Unlock()
		r.finish(fill(r.buf, a, b))
		return
	}
	if e.gone[h.Comm] != nil { // a communicator freed here: dropped
		e.mu.Unlock()
		return
	}
	in := newInbox(h.Len)
	fill(in.buf, a, b) // h.Len bytes: it fits
	in.complete = true
	e.queue(k).unexp.push(in)
	e.mu.Unlock()
}

// Offer implements transport.Offerer: a message left in its sender's
// memory is taken at once into the receive that matches it, or kept, in
// order with the peer's other messages, until one is posted. Either way
// it crosses memory once, where an early message that streams is copied
// into an inbox and out again.
func (e *engine) Offer(peer int, h transport.Header, o transport.Offer) {
	k := matchKey{h.Comm, peer, h.Tag}
	e.mu.Lock()
	if r := e.popPosted(k); r != nil {
		r.stage = reqClaimed
		e.mu.Unlock()
		n, err := takeOffer(o, h.Len, r.buf)
		e.mu.Lock()
		r.stage = reqDone
		e.mu.Unlock()
		r.finish(n, err)
		return
	}
	if e.gone[h.Comm] != nil {
		e.mu.Unlock()
		o.Release()
		return
	}
	q := e.queue(k)
	q.unexp.push(newOfferBox(o, h.Len))
	e.mu.Unlock()
}

// fill copies a message, a followed by b (nil but where it wraps around a
// ring's end), into a receive buffer and reports the result.
func fill(dst, a, b []byte) (int, error) {
	n := copy(dst, a)
	n += copy(dst[n:], b)
	if m := len(a) + len(b); m > len(dst) {
		return n, fmt.Errorf("%w: %d bytes arrived for a %d-byte buffer", ErrTruncated, m, len(dst))
	}
	return n, nil
}

// Lost implements transport.Handler: every receive that can no longer be
// satisfied by peer fails with err; messages that already arrived stay
// receivable.
func (e *engine) Lost(peer int, err error) {
	var fail []*Request
	e.mu.Lock()
	if e.lost[peer] != nil {
		e.mu.Unlock()
		return
	}
	e.lost[peer] = err
	if e.report != nil && e.closed == nil { // not this rank's own Close
		defer e.report(peer) // after the lock
	}
	switch v := e.inflight[peer].(type) {
	case *Request:
		fail = append(fail, v)
	case *inbox:
		if v.waiter != nil {
			fail = append(fail, v.waiter)
		}
	}
	e.inflight[peer] = nil
	for k, q := range e.queues {
		if k.src != peer {
			continue
		}
		fail = append(fail, q.posted.items()...)
		q.posted.reset()
		q.unexp.keep(func(in *inbox) bool {
			if in.offer != nil { // it cannot be taken from a lost peer
				in.offer.Release()
				in.recycle()
				return false
			}
			return in.complete
		})
		e.tidy(k, q)
	}
	s := &e.senders[peer]
	fail = append(fail, s.q.items()...)
	s.q.reset()
	for _, r := range fail {
		r.stage = reqDone
	}
	e.mu.Unlock()
	for _, r := range fail {
		r.finish(0, err)
	}
}

// irecvWatch posts a receive from world rank src; watch says whether to
// ask the transport to watch src (Transport.Watch: over TCP, dial it), so
// that its loss fails the receive even where nothing else reaches src.
func (e *engine) irecvWatch(comm uint32, src int, tag int32, buf []byte, watch bool) *Request {
	r := newRequest(e, recvReq, buf)
	r.key = matchKey{comm, src, tag}
	e.mu.Lock()
	if q := e.find(r.key); q != nil && q.unexp.len() > 0 {
		in := q.unexp.pop()
		e.tidy(r.key, q)
		if in.offer != nil {
			r.stage = reqDone
			e.mu.Unlock()
			in.take(r)
			return r
		}
		if !in.complete {
			in.waiter = r
			r.stage = reqClaimed
			e.mu.Unlock()
			return r
		}
		r.stage = reqDone
		e.mu.Unlock()
		n, err := fill(buf, in.buf, nil)
		in.recycle()
		r.settle(n, err)
		return r
	}
	err := e.gone[comm]
	if err == nil {
		err = e.unusable(src)
	}
	if err != nil {
		r.stage = reqDone
		e.mu.Unlock()
		r.finish(0, err)
		return r
	}
	q := e.queue(r.key)
	q.posted.push(r)
	watch = watch && !e.watched[src] && src != e.self
	if watch {
		e.watched[src] = true
	}
	e.mu.Unlock()
	if watch {
		e.tr.Watch(src)
	}
	return r
}

// unusable says why peer cannot be talked to, or nil. Caller holds e.mu.
func (e *engine) unusable(peer int) error {
	if e.closed != nil {
		return e.closed
	}
	return e.lost[peer]
}

// cancel removes r if no bytes of it have moved yet and completes it with
// cause, or takes back a started send its receiver has not begun to copy;
// it reports whether it did.
func (e *engine) cancel(r *Request, cause error) bool {
	e.mu.Lock()
	if r.stage != reqQueued {
		claimed := r.stage == reqClaimed
		e.mu.Unlock()
		if w, ok := e.tr.(transport.Withdrawer); ok && claimed && r.kind == sendReq && r.started.Load() {
			return w.Withdraw(r.key.src, (*started)(r), cause)
		}
		return false
	}
	if r.kind == recvReq {
		if q := e.find(r.key); q != nil {
			q.posted.keep(func(x *Request) bool { return x != r })
			e.tidy(r.key, q)
		}
	} else {
		s := &e.senders[r.key.src]
		s.q.keep(func(x *Request) bool { return x != r })
	}
	r.stage = reqDone
	e.mu.Unlock()
	r.finish(0, cause)
	return true
}

// close fails every posted receive and queued send with err.
func (e *engine) close(err error) {
	var fail []*Request
	e.mu.Lock()
	if e.closed != nil {
		e.mu.Unlock()
		return
	}
	e.closed = err
	for k, q := range e.queues {
		for _, r := range q.posted.items() {
			r.stage = reqDone
			fail = append(fail, r)
		}
		q.posted.reset()
		e.tidy(k, q)
	}
	for i := range e.senders {
		for _, r := range e.senders[i].q.items() {
			r.stage = reqDone
			fail = append(fail, r)
		}
		e.senders[i].q.reset()
	}
	e.mu.Unlock()
	for _, r := range fail {
		r.finish(0, err)
	}
}
