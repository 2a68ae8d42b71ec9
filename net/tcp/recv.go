package tcp

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

// reader is the receiving side of one up connection: its decoder, and the
// lock that lets exactly one goroutine at a time read the socket and call
// the Handler for this peer. Two kinds of goroutine take turns:
//
//   - the connection's reader goroutine (run), which waits for readiness in
//     Go's netpoller and reads while nobody polls;
//   - goroutines waiting in spmd's Request.Wait, which read through
//     Transport.Poll between BeginPoll and EndPoll.
//
// All reads are non-blocking: the reader goroutine reads inside
// syscall.RawConn.Read's callback and waits for readiness outside it,
// without the lock; pollers read inside RawConn.Control, which, unlike
// RawConn.Read, does not queue behind the reader goroutine waiting for
// readiness.
//
// The netpoller is edge-triggered: it wakes the reader goroutine when data
// arrives, not while data is there. So whoever leaves data in the socket
// must make sure that someone reads it later. The rule that guarantees it:
//
//  1. The reader goroutine waits for readiness only after it exhausted the
//     socket (a read returned EAGAIN), or after it saw pollers > 0 once its
//     last read was done. Before every look at pollers it sets left, and
//     it clears left only once it has exhausted the socket.
//  2. EndPoll decrements pollers first and then, when the count reached
//     zero, drains every connection whose left it finds set (clearing it).
//
// Take data D that nobody has read. If D arrived after the reader
// goroutine's last look at pollers, its arrival makes the goroutine look
// again (the netpoller keeps a readiness that comes while nobody waits for
// the next wait), and it reads D or leaves it under rule 1. If D arrived
// before, and the goroutine waits after exhausting the socket, it read D.
// If it waits after seeing pollers > 0, it set left before that look, and
// the look came before the decrement that brings pollers back to zero; both
// are sequentially consistent atomics, so the EndPoll that follows that
// decrement finds left set and reads D. Hence no data is stranded, and a
// reader goroutine that wakes while pollers are active only looks at the
// count and waits again.
//
// EndPoll reads nothing else: the rest is the reader goroutine's, which
// the netpoller wakes for it. Only when the pollers' last read of a
// connection filled its buffer (full), a sign that a large message goes
// on, does EndPoll read that connection too, rather than leave the rest
// waiting for the netpoller's next look. It used to read every connection
// until exhausted: an empty read for each connection after every Wait that
// polled. Alternating runs of an 8-byte all-reduce over TCP at np 4 on 2
// cores, 20000 calls, means of 10 rounds: 61.4 us reading every
// connection, 58.2 asking the ready set which to read, 54.6 reading only
// what the rule needs.
//
// A terminal error (end of stream, reset, malformed frame) is reported
// through Handler.Lost by whoever meets it, under mu, once (done); the
// connection is then closed outside mu, which wakes the reader goroutine,
// and it ends.
type reader struct {
	p  *peer
	c  *net.TCPConn
	rc syscall.RawConn

	// The callbacks handed to rc, built once so that reads allocate nothing.
	serveFn         func(fd uintptr) bool
	pollFn, drainFn func(fd uintptr)
	stopFn          func() bool

	gone chan struct{} // closed when the reader goroutine ends: the writer goroutine ends too

	// left is set by the reader goroutine before it looks at the pollers
	// count, and cleared once it has exhausted the socket; EndPoll drains
	// the connection if it finds left set (see the rule above).
	left atomic.Bool
	// full is whether the last read filled the space it was given, so
	// that more may wait in the socket: EndPoll drains the connection
	// then too, rather than leave the rest to the netpoller's next look.
	full atomic.Bool

	mu    sync.Mutex // held by the goroutine that reads c; protects following
	dec   decoder
	fd    int   // the descriptor inside the current rc callback
	moved bool  // results of the last pump inside rc.Control:
	cause error // whether it read anything, why the stream ended
	done  bool  // the loss is reported; nothing more is read or delivered
	// stopped is whether the reader goroutine's last pump stopped because
	// someone polls, not because the socket was exhausted.
	stopped bool
}

func newReader(p *peer, c *net.TCPConn) (*reader, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	r := &reader{p: p, c: c, rc: rc, gone: make(chan struct{})}
	r.dec = newDecoder(p.t.handler, p.rank, func() bool { return p.failed.Load() != nil }, readBufferSize)
	r.serveFn = r.serve
	r.pollFn = func(fd uintptr) { r.pump(fd, 1) }
	r.drainFn = func(fd uintptr) { r.pump(fd, -1) }
	r.stopFn = func() bool {
		r.left.Store(true)
		r.stopped = p.t.pollers.Load() > 0
		return r.stopped
	}
	return r, nil
}

// run is the reader goroutine: it reads until the stream ends, then makes
// sure the loss is reported and closes the connection.
func (r *reader) run() {
	err := r.rc.Read(r.serveFn)
	r.mu.Lock()
	if !r.done {
		r.lose(err) // closed, timed out (Close's linger) or failed
	}
	r.mu.Unlock()
	r.c.Close()
	close(r.gone)
}

// retire makes r read and deliver nothing more, for a connection dropped
// before its reader goroutine started; the peer's loss is reported by fail.
func (r *reader) retire() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// serve is the reader goroutine's callback inside rc.Read: it reads until
// the socket is exhausted or someone polls, and returns false to wait for
// readiness or true once the loss is reported.
func (r *reader) serve(fd uintptr) bool {
	r.left.Store(true)
	if r.p.t.pollers.Load() > 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.fd = int(fd)
		r.stopped = false
		if _, err := r.dec.pump(r, -1, r.stopFn); err != nil {
			r.lose(err) // run closes c once rc.Read returns
		} else if !r.stopped {
			// Exhausted: what arrives from now on wakes this goroutine
			// again, which sets left before it looks at the pollers.
			r.left.Store(false)
		}
	}
	return r.done
}

// pump is a poller's callback inside rc.Control: at most reads reads
// (reads < 0: until exhausted). r.mu is held.
func (r *reader) pump(fd uintptr, reads int) {
	r.fd = int(fd)
	read := r.dec.read
	frames, err := r.dec.pump(r, reads, nil)
	r.moved, r.cause = frames > 0 || r.dec.read != read, err
}

// poll reads what c holds, once, unless another goroutine is reading it,
// and reports whether that read anything or found the peer lost.
func (r *reader) poll() bool {
	if !r.mu.TryLock() {
		return false
	}
	return r.control(r.pollFn)
}

// settle drains c if something may be left in it for the pollers: the
// reader goroutine left it to them, or the last read filled its buffer.
// EndPoll calls it once the pollers count is zero.
func (r *reader) settle() {
	if r.left.Swap(false) || r.full.Load() {
		r.drain()
	}
}

// drain reads until c is exhausted, waiting for whoever reads it now.
func (r *reader) drain() {
	r.mu.Lock()
	r.control(r.drainFn)
}

// control runs f on c's descriptor and then reports the loss, if f met
// one. r.mu is held, and released.
func (r *reader) control(f func(fd uintptr)) bool {
	if r.done {
		r.mu.Unlock()
		return false
	}
	r.moved, r.cause = false, nil
	// An error means c is closed: the reader goroutine wakes and reports.
	err := r.rc.Control(f)
	lost := err == nil && r.cause != nil
	if lost {
		r.lose(r.cause)
	}
	moved := err == nil && (r.moved || lost)
	r.mu.Unlock()
	if lost {
		// Outside rc's callbacks, which hold c, and without mu, which the
		// reader goroutine may be waiting for inside its callback: Close
		// waits until the reader goroutine has let go of c.
		r.c.Close()
	}
	return moved
}

// lose reports the loss of the peer, once. r.mu is held, so that Lost
// follows the peer's last Deliver and nothing follows it.
func (r *reader) lose(cause error) {
	if cause == io.EOF {
		cause = errPeerClosed
	}
	err := r.p.fail(transport.Lost(r.p.rank, r.p.addr, cause))
	r.done = true
	r.p.t.handler.Lost(r.p.rank, err)
}

// Read implements source on the descriptor of the current callback.
func (r *reader) Read(p []byte) (int, error) {
	for {
		n, err := rawRead(r.fd, p)
		r.full.Store(err == 0 && n == len(p))
		switch err {
		case 0:
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, errAgain
		}
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: r.c.LocalAddr(), Addr: r.c.RemoteAddr(),
			Err: os.NewSyscallError("read", err)}
	}
}
