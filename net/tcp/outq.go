package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

// The sending side. Every frame goes out through non-blocking writes on
// whichever goroutine happens to be there:
//
//   - the sender's own goroutine first: a frame that finds its peer's
//     queue empty and the socket with room is written at once (Send and
//     TrySend, and StartSend up to syncWriteMax);
//   - what the socket does not take waits in the peer's queue, in order,
//     and is written by a goroutine that polls (spmd's Request.Wait, between
//     BeginPoll and EndPoll), so that a waiting rank moves its own sends
//     and receives on one thread, as Open MPI's progress loop does;
//   - while nobody polls, by the connection's writer goroutine, which waits
//     in Go's netpoller for the socket to have room.
//
// spmd's Isend of more than 64 KiB used to take a goroutine per message,
// which wrote with a blocking Send; with the queue a started send costs no
// goroutine and allocates nothing, and a rank waiting for a ring's
// segments writes the next ones in the loop that reads them. All-reduce
// over TCP, medians of 5-7 alternating collbench runs in three sittings:
// np 2 at 256 KiB 309-387 -> 228-281 us, np 4 (2 cores) at 128 KiB 737 ->
// 609 us and at 512 KiB 1873 -> 1501 us; 8 B-64 KiB and 1-16 MiB within
// the noise.
//
// The rules that keep it straight:
//
//  1. Only a goroutine that holds p.sendMu writes to the socket or takes
//     frames off the queue; anyone appends to it under p.out.mu.
//  2. A frame partly written stays at the head of the queue until the
//     rest is out: nothing else may come between.
//  3. Whoever queues a frame makes sure someone writes it: while anyone
//     polls, a poller writes it at its next Poll, and the last EndPoll
//     writes what is left and then wakes the writer goroutine; otherwise
//     the writer goroutine is woken (kick). It waits for room only after a
//     write found the socket full, so a wake-up is sure to come.
//  4. Whoever fails the peer then tries to take p.sendMu to fail the queued
//     frames; whoever lets go of p.sendMu then looks whether the peer failed
//     meanwhile (unlockSend). One of the two sees the other, so no queued
//     frame waits for a link that is gone.

// outgoing is one frame in a peer's queue: what is left of it to write,
// and whom to tell when it is out or failed.
type outgoing struct {
	hdr     [headerSize]byte
	iov     [2][]byte // what is left: the header's rest, the payload's rest
	total   int       // bytes in the whole frame
	written int       // bytes of it already written; iov and written are guarded by p.sendMu once queued

	done transport.Done // a started send (StartSend); nil otherwise
	// wait receives the outcome of a blocking Send, which waits on it and
	// then recycles the outgoing; made once per pooled outgoing.
	wait chan error
	send bool // a blocking Send waits on wait
}

var outgoings = sync.Pool{New: func() any { return &outgoing{wait: make(chan error, 1)} }}

func newOutgoing(h transport.Header, payload []byte) *outgoing {
	o := outgoings.Get().(*outgoing)
	putHeader(o.hdr[:], h)
	o.iov[0], o.iov[1] = o.hdr[:], payload
	o.total = headerSize + len(payload)
	return o
}

// skip records that the first n bytes of the frame are written.
func (o *outgoing) skip(n int) {
	o.written += n
	k := min(n, len(o.iov[0]))
	o.iov[0] = o.iov[0][k:]
	o.iov[1] = o.iov[1][n-k:]
}

func (o *outgoing) finished() bool { return o.written == o.total }

// complete tells the frame's owner its outcome. A blocking Send's outgoing
// goes back to the pool once Send has its result; any other at once.
func (o *outgoing) complete(err error) {
	if o.send {
		o.wait <- err
		return
	}
	d := o.done
	o.recycle()
	if d != nil {
		d.SendDone(err)
	}
}

func (o *outgoing) recycle() {
	*o = outgoing{wait: o.wait}
	outgoings.Put(o)
}

// outq is a peer's queue of frames waiting to be written.
type outq struct {
	mu sync.Mutex // protects q
	q  []*outgoing

	wake    chan struct{}         // capacity 1: kick's wake-up for the writer goroutine
	writeFn func(fd uintptr) bool // writeQueued, built once

	// flushFn is flushFD for rc.Control, built once, with its results;
	// guarded by p.sendMu.
	flushFn     func(fd uintptr)
	moved, full bool
}

func (p *peer) queued() bool {
	p.out.mu.Lock()
	defer p.out.mu.Unlock()
	return len(p.out.q) > 0
}

// syncWriteMax is the largest frame that enqueue writes on its caller's
// goroutine; a larger one is left to the pollers or the writer goroutine.
// Writing a large frame at once fills the socket (up to its 4 MiB buffer)
// before the caller gets to post its receives, whose messages then arrive
// early and are copied twice. Ring all-reduce over TCP at np 2, medians of
// 6 alternating runs, two sittings (frames up to 64 KiB / 256 KiB / 1 MiB
// written at once): 256 KiB 284 / 182 / 197 us, 16 MiB 14.1 / 13.1 /
// 13.8 ms; writing every frame at once, 16 MiB took 14.8-15.4 ms.
const syncWriteMax = 256<<10 + headerSize

// enqueue puts o at the end of the queue, writes what it can if o is
// small and no one else is writing, and makes sure that someone writes
// the rest.
func (p *peer) enqueue(r *reader, o *outgoing) {
	// Once o is in the queue a poller may write it, complete it and put it
	// back in the pool: it is not to be read after.
	small := o.total <= syncWriteMax
	p.out.mu.Lock()
	p.out.q = append(p.out.q, o)
	p.out.mu.Unlock()
	if small && p.sendMu.TryLock() {
		p.flush(r)
		p.unlockSend()
	}
	p.kick()
}

// pushFront puts the rest of a frame whose start its caller, holding
// p.sendMu, has just written at the head of the queue (rule 2).
func (p *peer) pushFront(o *outgoing) {
	p.out.mu.Lock()
	p.out.q = slices.Insert(p.out.q, 0, o)
	p.out.mu.Unlock()
}

// writeNow writes the frame h, payload with one non-blocking writev if the
// queue is empty, and returns how many bytes went out, or -1 when the
// queue holds frames (or the link failed) and nothing was tried.
// p.sendMu is held.
func (p *peer) writeNow(r *reader, h transport.Header, payload []byte) int {
	if p.failed.Load() != nil || p.queued() {
		return -1
	}
	s := &p.sender
	putHeader(s.hdr[:], h)
	s.iov[0], s.iov[1] = s.hdr[:], payload
	s.n, s.werr = 0, nil
	err := r.rc.Control(s.writev)
	s.iov[1] = nil // do not keep the caller's payload alive
	switch {
	case err != nil: // closed: the reader reports the loss
		return 0
	case s.werr == unix.EAGAIN:
		return 0
	case s.werr != nil:
		p.broken(s.werr)
		return 0
	}
	return s.n
}

// flush writes queued frames until the queue is empty or the socket is
// full, and reports whether it stopped on a full socket. p.sendMu is held.
func (p *peer) flush(r *reader) (full bool) {
	_, full = p.flushMoved(r)
	return full
}

// flushMoved is flush that also reports whether it wrote anything.
func (p *peer) flushMoved(r *reader) (moved, full bool) {
	p.out.moved, p.out.full = false, false
	if r.rc.Control(p.out.flushFn) != nil {
		p.failQueue() // the connection is closed: the reader reports the loss
	}
	return p.out.moved, p.out.full
}

// flushFD is flush on the socket fd; it also reports whether it stopped
// because the socket was full. p.sendMu is held.
func (p *peer) flushFD(fd int) (moved, full bool) {
	for {
		if p.failed.Load() != nil {
			p.failQueue()
			return moved, false
		}
		p.out.mu.Lock()
		if len(p.out.q) == 0 {
			p.out.mu.Unlock()
			return moved, false
		}
		o := p.out.q[0]
		p.out.mu.Unlock()
		iov := o.iov[:]
		if len(iov[0]) == 0 {
			iov = iov[1:]
		}
		n, err := rawWritev(fd, iov)
		if n > 0 {
			moved = true
			o.skip(n)
		}
		if o.finished() {
			p.out.mu.Lock()
			p.out.q = popFront(p.out.q)
			p.out.mu.Unlock()
			o.complete(nil)
			continue
		}
		switch err {
		case 0, unix.EINTR:
			continue
		case unix.EAGAIN:
			return moved, true
		}
		p.broken(err)
		p.failQueue()
		return moved, false
	}
}

// broken fails the peer after a write error and closes the connection, so
// that its reader ends too.
func (p *peer) broken(err error) {
	p.fail(transport.Lost(p.rank, p.addr, fmt.Errorf("write: %w", err)))
	p.closeConn()
}

// closeConn closes the link's connection on a goroutine of its own: the
// caller may hold p.sendMu, and Close waits for a writer goroutine that
// may be waiting for it inside a callback that holds the connection.
func (p *peer) closeConn() {
	if c := p.conn.Load(); c != nil && !p.t.spawn(func() { c.Close() }) {
		go c.Close() // Close has begun: it closes the connection too
	}
}

func popFront(q []*outgoing) []*outgoing {
	copy(q, q[1:])
	q[len(q)-1] = nil
	return q[:len(q)-1]
}

// failQueue fails every queued frame with the peer's loss. p.sendMu is
// held, so no frame is being written.
func (p *peer) failQueue() {
	err := error(p.closedErr)
	if f := p.failed.Load(); f != nil {
		err = f.err
	}
	p.out.mu.Lock()
	q := p.out.q
	p.out.q = nil
	p.out.mu.Unlock()
	if len(q) > 0 && q[0].written > 0 {
		// The peer can only read a truncated frame now: close, so that
		// both readers end without waiting for Close's linger.
		p.closeConn()
	}
	for _, o := range q {
		o.complete(err)
	}
}

// unlockSend releases p.sendMu, and fails the queue if the peer failed
// while it was held (rule 4).
func (p *peer) unlockSend() {
	for {
		p.sendMu.Unlock()
		if p.failed.Load() == nil || !p.queued() || !p.sendMu.TryLock() {
			return
		}
		p.failQueue()
	}
}

// abandon fails the queued frames of a failed peer, unless a goroutine
// holds p.sendMu, which then does (rule 4).
func (p *peer) abandon() {
	if p.queued() && p.sendMu.TryLock() {
		p.failQueue()
		p.unlockSend()
	}
}

// kick wakes the writer goroutine if frames are queued and nobody polls
// (rule 3). A wake-up that comes while it writes is kept for when it is
// done, so none is lost.
func (p *peer) kick() {
	if p.t.pollers.Load() > 0 || !p.queued() {
		return
	}
	select {
	case p.out.wake <- struct{}{}:
	default:
	}
}

// writeLoop is the writer goroutine of the link whose reader is r: woken
// by kick, it writes the queue while nobody polls, waiting in the
// netpoller when the socket is full, until the reader goroutine ends. It
// lives as long as the connection, so that a send costs no goroutine.
func (p *peer) writeLoop(r *reader) {
	for {
		select {
		case <-p.out.wake:
		case <-r.gone:
			return
		}
		if err := r.rc.Write(p.out.writeFn); err != nil {
			// Closed, or Close set a past deadline: the link is lost.
			p.fail(transport.Lost(p.rank, p.addr, errors.Join(errWriterClosed, err)))
			p.sendMu.Lock()
			p.failQueue()
			p.unlockSend()
		}
	}
}

// writeQueued is the writer goroutine's callback inside rc.Write: it writes
// until the queue is empty or someone polls (true: done), or until the
// socket is full (false: wait for room, which will come).
func (p *peer) writeQueued(fd uintptr) bool {
	for p.t.pollers.Load() == 0 && p.queued() {
		p.sendMu.Lock()
		_, full := p.flushFD(int(fd))
		p.unlockSend()
		if full {
			return false
		}
	}
	return true
}

var errWriterClosed = errors.New("connection closed with frames waiting to be written")

// aLongTimeAgo is a write deadline in the past: it ends the writer
// goroutine's wait for room at once.
var aLongTimeAgo = time.Unix(1, 0)

// withdraw takes the queued frame o (or the one whose Done is done) off
// the queue with cause, unless it is written already, and reports whether
// it did. A frame partly written cannot be taken back without leaving the
// stream unframed; it is finished instead from a copy of what is left of
// it (finishFromCopy), its send completes as sent, and withdraw reports
// false.
func (p *peer) withdraw(match func(*outgoing) bool, cause error) bool {
	p.sendMu.Lock()
	p.out.mu.Lock()
	i := slices.IndexFunc(p.out.q, match)
	if i < 0 {
		p.out.mu.Unlock()
		p.unlockSend()
		return false
	}
	o := p.out.q[i]
	if o.written == 0 {
		p.out.q = slices.Delete(p.out.q, i, i+1)
		p.out.mu.Unlock()
		p.unlockSend()
		o.complete(cause)
		return true
	}
	p.out.q[i] = o.finishFromCopy()
	p.out.mu.Unlock()
	p.unlockSend()
	o.complete(nil)
	return false
}

// finishFromCopy returns an outgoing that writes the rest of o's frame
// from a copy of it and tells nobody when it is done, so that o's send can
// complete now. A send whose context ended half-way through its frame used
// to drop the link, and with it every later message between two healthy
// ranks: a collective aborted on one rank (its context cancelled) cut the
// links of the others' sends it had cancelled, which then named each other
// lost. p.sendMu is held, so nobody is writing o.
func (o *outgoing) finishFromCopy() *outgoing {
	c := outgoings.Get().(*outgoing)
	c.hdr = o.hdr
	c.iov[0] = c.hdr[headerSize-len(o.iov[0]):]
	c.iov[1] = bytes.Clone(o.iov[1])
	c.total, c.written = o.total, o.written
	return c
}
