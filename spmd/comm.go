package spmd

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// Comm is a communicator: an ordered group of ranks whose messages never mix
// with another communicator's. Ranks passed to its methods are ranks within
// the communicator. A Comm is safe for concurrent use; messages sent
// concurrently from several goroutines to one peer with one tag have no
// defined order between them.
type Comm struct {
	core  *core
	id    uint32 // header id of point-to-point traffic; id+1 carries collectives
	rank  int    // our rank in the communicator
	ranks []int  // communicator rank -> world rank
	coll  bool   // this value is the collective context of its communicator
	cc    *Comm  // the collective context (itself when coll), made once by newComm

	// seen caches the values Value found, round robin: every collective
	// call asks for its communicator's state, and the core's lock and map
	// lookup took a quarter of prims' own time in an 8-byte all-reduce.
	seen [valueSlots]atomic.Pointer[seenValue]
	next atomic.Uint32 // the slot the next miss fills
	// keyed caches the values of the first keyedSlots Keys, a slot each.
	keyed [keyedSlots]atomic.Pointer[seenValue]
}

// valueSlots is how many values a Comm caches: prims' state and topo's
// model, with room to spare.
const valueSlots = 4

// seenValue is a value Value found, valid while the core's valuesGen is
// gen.
type seenValue struct {
	key, val any
	gen      uint64
}

// newComm returns the communicator with its collective context, made once
// here so that Collective, which every collective call asks for, allocates
// nothing.
func newComm(core *core, id uint32, rank int, ranks []int) *Comm {
	c := &Comm{core: core, id: id, rank: rank, ranks: ranks}
	core.trace.Comm(id, ranks)
	cc := &Comm{core: core, id: id + 1, rank: rank, ranks: ranks, coll: true}
	cc.cc = cc
	c.cc = cc
	return c
}

// Rank returns the calling rank's index in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the communicator.
func (c *Comm) Size() int { return len(c.ranks) }

// WorldRank returns the world rank of communicator rank r.
func (c *Comm) WorldRank(r int) int { return c.ranks[r] }

// ID returns the communicator's id, unique among the communicators that
// share any rank with it.
func (c *Comm) ID() uint32 { return c.id }

// Collective returns the communicator's collective context: the same ranks
// and tags, but traffic that never matches the communicator's
// point-to-point messages, the way MPI keeps a separate context for
// collectives. Libraries that implement collectives (package prims) send on
// it so that a user's pending receive can never take their messages.
//
// Its tags are shared by the packages that use it, which keep out of each
// other's way: spmd takes MaxTag (Barrier), MaxTag-1 (Split) and MaxTag-2
// (the trace's clock offsets), topo MaxTag-16 and MaxTag-17 (its probes),
// and prims (collective+1)<<16|phase, 1<<30 (its notices), 1<<30+1 (the
// decision table rank 0 sends) and 1<<30+2 (gorun --tune's timings).
func (c *Comm) Collective() *Comm {
	return c.cc
}

// Peer returns what the rendezvous said about communicator rank r: its
// host identity, hostname and address.
func (c *Comm) Peer(r int) Peer { return c.core.peers[c.ranks[r]] }

// Value returns the value attached to the communicator under key, or nil.
// Communicators made by Split inherit their parent's values. Packages use
// it to cache per-communicator state, as topo caches its fitted model.
// Under a Key the lookup is quickest (see Key).
func (c *Comm) Value(key any) any {
	gen := c.core.valuesGen.Load()
	if k, ok := key.(*Key); ok && k.id < keyedSlots {
		if e := c.keyed[k.id].Load(); e != nil && e.gen == gen {
			return e.val
		}
		e := c.lookup(key)
		c.keyed[k.id].Store(e)
		return e.val
	}
	for i := range c.seen {
		if e := c.seen[i].Load(); e != nil && e.gen == gen && e.key == key {
			return e.val
		}
	}
	e := c.lookup(key)
	c.seen[c.next.Add(1)%valueSlots].Store(e)
	return e.val
}

// lookup finds key's value in the core's map, with the generation it is
// valid for.
func (c *Comm) lookup(key any) *seenValue {
	c.core.mu.Lock()
	defer c.core.mu.Unlock()
	return &seenValue{key: key, val: c.core.values[valueKey{c.base(), key}], gen: c.core.valuesGen.Load()}
}

// A Key is a key of a Comm's values (Value, SetValue) that compares by
// identity, made by NewKey. Each of the first keyedSlots keys made has a
// slot of its own in every Comm's cache of values, where Value finds it
// with two loads instead of comparing keys as interfaces among the values
// it found last: prims asks for its state at every collective call, and
// that lookup was a tenth of an 8-byte broadcast on 2 ranks.
type Key struct {
	id   int32
	name string
}

// NewKey returns a new Key, named for String.
func NewKey(name string) *Key { return &Key{id: keys.Add(1) - 1, name: name} }

func (k *Key) String() string { return k.name }

// keys counts the Keys made.
var keys atomic.Int32

// keyedSlots is how many Keys have a slot of their own.
const keyedSlots = 4

// SetValue attaches v to the communicator under key, for this rank only;
// on a communicator freed here (Free) it does nothing.
func (c *Comm) SetValue(key, v any) {
	if c.core.engine.freed(c.base()) != nil {
		return // nothing may hold on to a freed communicator
	}
	c.core.mu.Lock()
	defer c.core.mu.Unlock()
	c.core.values[valueKey{c.base(), key}] = v
	c.core.valuesGen.Add(1)
}

// base is the id of the point-to-point context, shared by both contexts.
func (c *Comm) base() uint32 {
	if c.coll {
		return c.id - 1
	}
	return c.id
}

// SingleCopy returns the smallest message to rank r that r copies straight
// out of this rank's memory (shared memory's single copy, where the
// receivers of one sender copy in parallel), or 0 when every message to r
// goes through a transport's buffers. Package topo models it.
func (c *Comm) SingleCopy(r int) int {
	if r < 0 || r >= len(c.ranks) {
		return 0
	}
	if pl, ok := c.core.tr.(transport.Puller); ok {
		return pl.SingleCopy(c.ranks[r])
	}
	return 0
}

// Trace returns the recorder that every message and collective passes, or
// nil when profiling is off. Its methods are no-ops on nil.
func (c *Comm) Trace() *trace.Recorder { return c.core.trace }

func (c *Comm) peer(op string, r int) (int, error) {
	if r < 0 || r >= len(c.ranks) {
		return 0, fmt.Errorf("%s: rank %d on a communicator of %d ranks: %w", op, r, len(c.ranks), ErrBadRank)
	}
	return c.ranks[r], nil
}

func checkTag(op string, tag int) error {
	if tag < 0 || tag > MaxTag {
		return fmt.Errorf("%s: tag %d: %w (want 0..%d)", op, tag, ErrBadTag, MaxTag)
	}
	return nil
}

// Isend starts sending buf to rank dst with tag and returns at once. buf must
// not be modified until the request completes. ctx bounds the send: one
// whose ctx has ended when its turn to go comes fails with ctx's error, so
// that of sends to dst that share a ctx those that arrive are the first
// ones, never some with a gap before them (WaitAll cancels from the last
// for the same reason). A large
// message to a rank of the same host stays in buf until dst's matching
// receive copies it out (shared memory's single copy), so its request
// completes only once that receive is posted; Send does not wait for the
// receive. A Wait whose context ends before the receive has begun to copy
// takes such a send back: a receive that already matched it fails with
// ErrWithdrawn, one not yet posted never sees it, and the link to dst
// stays up. (Over TCP a send cancelled half-way through its frame is
// finished from a copy of the rest, and completes; one streamed through
// the shared-memory ring and cancelled half-way, where the kernel refuses
// single copy, drops the link.) A receiver that frees its communicator drops the
// messages waiting for it, and their sends complete.
func (c *Comm) Isend(ctx context.Context, dst, tag int, buf []byte) *Request {
	return c.send(ctx, dst, tag, buf, false, true)
}

// Send sends buf to rank dst with tag and returns once buf may be reused.
func (c *Comm) Send(ctx context.Context, dst, tag int, buf []byte) error {
	r := c.send(ctx, dst, tag, buf, true, false)
	_, err := r.Wait(ctx)
	r.release()
	return err
}

// send starts a send. With wait, the caller's goroutine moves the bytes
// (see engine.isend); nonBlocking says, for the trace, that the caller
// does not wait for it at once (Isend).
func (c *Comm) send(ctx context.Context, dst, tag int, buf []byte, wait, nonBlocking bool) *Request {
	e := c.core.engine
	r := newRequest(e, sendReq, buf)
	r.ctx = ctx
	w, err := c.peer("send", dst)
	if err == nil {
		err = checkTag("send", tag)
	}
	if err != nil {
		r.finish(0, err)
		return r
	}
	r.key = matchKey{comm: c.id, src: w, tag: int32(tag)} // src holds the destination for sends
	c.traceRequest(r, trace.SendEvent, w, tag, nonBlocking)
	e.isend(r, w, wait)
	return r
}

// Irecv posts a receive of a message from rank src with tag into buf and
// returns at once. Wait returns the message's length.
func (c *Comm) Irecv(src, tag int, buf []byte) *Request {
	return c.irecv(src, tag, buf, true)
}

func (c *Comm) irecv(src, tag int, buf []byte, nonBlocking bool) *Request {
	r, w := c.post(src, tag, buf, true)
	if w >= 0 {
		c.traceRequest(r, trace.RecvEvent, w, tag, nonBlocking)
	}
	return r
}

// post posts a receive from rank src with tag, asking the transport to
// watch src when watch is set (engine.irecvWatch), and returns it and
// src's world rank; a bad rank or tag is a request failed at once, and -1.
func (c *Comm) post(src, tag int, buf []byte, watch bool) (*Request, int) {
	w, err := c.peer("recv", src)
	if err == nil {
		err = checkTag("recv", tag)
	}
	if err != nil {
		r := newRequest(c.core.engine, recvReq, buf)
		r.finish(0, err)
		return r, -1
	}
	return c.core.engine.irecvWatch(c.id, w, int32(tag), buf, watch), w
}

// Listen posts a receive, as Irecv does, for a message that may never
// come, such as a library's word that a peer gave up: it does not ask the
// transport to reach src (over TCP, Irecv dials src, so that its loss
// fails the receive), so that listening to every rank connects no pair
// that nothing else connects, and it is not traced. It completes when the
// message comes, and fails when src is known lost by other means (the
// gossip, other calls), or when c is freed or the world closes. Its Wait
// blocks at once, where another request's first polls the transport for
// a while (pollBudget): prims listens to every other rank of each
// communicator from its first collective, each receive waited for by a
// goroutine of its own, and their polls, a millisecond each, took the
// core of a rank bound to one from the collectives that followed (a
// 2-rank job's first 10,000 8-byte all-reduces on the 2-core VM met a
// stall of 0.3-1.1 ms: perf found prims' listeners in Poll on the rank's
// other thread).
func (c *Comm) Listen(src, tag int, buf []byte) *Request {
	r, _ := c.post(src, tag, buf, false)
	r.quiet = true
	return r
}

// Recv receives a message from rank src with tag into buf and returns its
// length. A message longer than buf fails with ErrTruncated.
func (c *Comm) Recv(ctx context.Context, src, tag int, buf []byte) (int, error) {
	r := c.irecv(src, tag, buf, false)
	n, err := r.Wait(ctx)
	r.release()
	return n, err
}

// Sendrecv sends sendbuf to dst and receives from src into recvbuf at the
// same time, so that ranks exchanging in a ring cannot deadlock.
func (c *Comm) Sendrecv(ctx context.Context, sendbuf []byte, dst, sendtag int, recvbuf []byte, src, recvtag int) (int, error) {
	rr := c.irecv(src, recvtag, recvbuf, false)
	sr := c.send(ctx, dst, sendtag, sendbuf, false, false) // Sendrecv waits for both
	n, rerr := rr.Wait(ctx)
	_, serr := sr.Wait(ctx)
	rr.release()
	sr.release()
	if rerr != nil {
		return n, rerr
	}
	return n, serr
}

// barrierTag is the collective-context tag of Barrier's messages.
const barrierTag = 1<<31 - 1

// Barrier returns once every rank of the communicator has entered it. It
// uses the dissemination algorithm: ceil(log2 p) rounds of empty messages.
func (c *Comm) Barrier(ctx context.Context) error {
	cc := c.Collective()
	p := cc.Size()
	if t := c.core.trace; t != nil && !c.coll {
		defer c.traceBarrier(t, t.Now(), t.NextSeq(c.id), t.Site())
	}
	for d := 1; d < p; d <<= 1 {
		to := (cc.rank + d) % p
		from := (cc.rank - d + p) % p
		if _, err := cc.Sendrecv(ctx, nil, to, barrierTag, nil, from, barrierTag); err != nil {
			return fmt.Errorf("barrier on comm %d: %w", c.id, err)
		}
	}
	return nil
}

// traceBarrier records a Barrier that began at start.
func (c *Comm) traceBarrier(t *trace.Recorder, start int64, seq uint64, site uint32) {
	t.Record(trace.Event{Kind: trace.CollectiveEvent, Start: start, Comm: c.id, Peer: -1, Seq: seq, Site: site}, "barrier", "dissemination")
}
