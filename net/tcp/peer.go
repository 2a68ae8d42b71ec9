package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// linkState is where a peer's connection stands. It only moves forward:
// idle -> dialing -> up -> lost, where any state may jump to lost and idle
// may jump to up (an accepted connection).
type linkState int

const (
	idle    linkState = iota // no connection, no dial
	dialing                  // our dial is in flight or backing off
	up                       // one authenticated, accepted connection
	lost                     // reported, or about to be reported, to Handler.Lost
)

const (
	firstBackoff = 10 * time.Millisecond
	maxBackoff   = 500 * time.Millisecond
)

// keepAlive notices a peer host that vanished without closing its
// connections (power loss, network partition) within about 20 s.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}

// errPeerClosed is the cause of a loss at a clean end of stream.
var errPeerClosed = errors.New("connection closed by the peer")

// failure boxes a loss error for atomic publication.
type failure struct{ err error }

// peer is the link to one other rank. Once the link is up, its reader
// (the reader goroutine or a poller, one at a time) is the only caller of
// the Handler for this rank and reports the loss of the link, while fail
// reports the loss of a link that never came up.
type peer struct {
	t         *Transport
	rank      int
	addr      string
	closedErr error         // returned by Send after Close
	ready     chan struct{} // closed when the state becomes up or lost

	conn   atomic.Pointer[net.TCPConn] // set when the state becomes up
	rd     atomic.Pointer[reader]      // conn's receiving side
	failed atomic.Pointer[failure]     // set when the state becomes lost

	mu    sync.Mutex // protects following
	state linkState
	err   error // the first loss error

	// sendMu is held by whoever writes on the link (see outq.go); it
	// guards sender.
	sendMu sync.Mutex
	sender sender
	out    outq // frames waiting to be written
}

func newPeer(t *Transport, rank int, addr string) *peer {
	p := &peer{
		t:         t,
		rank:      rank,
		addr:      addr,
		closedErr: &transport.PeerError{Rank: rank, Addr: addr, Err: transport.ErrClosed},
		ready:     make(chan struct{}),
	}
	p.sender.init()
	p.out.wake = make(chan struct{}, 1)
	p.out.writeFn = p.writeQueued
	p.out.flushFn = func(fd uintptr) { p.out.moved, p.out.full = p.flushFD(int(fd)) }
	return p
}

// ensureDial starts a dial in the background unless one ran already.
func (p *peer) ensureDial() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == idle && p.t.spawn(p.dialLoop) {
		p.state = dialing
	}
}

// connect returns the connection, dialing first if need be.
func (p *peer) connect(ctx context.Context) (*net.TCPConn, error) {
	p.ensureDial()
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f := p.failed.Load(); f != nil {
		return nil, f.err
	}
	return p.conn.Load(), nil
}

// dialLoop dials until a connection is up (ours or the peer's), the dial
// timeout passes, or the transport closes.
func (p *peer) dialLoop() {
	deadline := time.Now().Add(p.t.cfg.dialTimeout)
	backoff := firstBackoff
	for !p.settled() {
		c, err := p.dialOnce(deadline)
		if err == nil {
			p.install(c)
			return
		}
		if p.t.ctx.Err() != nil {
			return
		}
		p.t.logf("rank %d: dial rank %d at %s: %v", p.t.rank, p.rank, p.addr, err)
		if errors.Is(err, errAuth) || !time.Now().Before(deadline) {
			p.giveUp(transport.Lost(p.rank, p.addr, fmt.Errorf("dial: %w", err)))
			return
		}
		if !p.t.sleep(min(backoff, time.Until(deadline))) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// dialOnce makes one connection attempt and runs the dialer's handshake.
func (p *peer) dialOnce(deadline time.Time) (*net.TCPConn, error) {
	d := net.Dialer{Deadline: deadline}
	nc, err := d.DialContext(p.t.ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	c := nc.(*net.TCPConn)
	stop := context.AfterFunc(p.t.ctx, func() { c.Close() })
	c.SetDeadline(time.Now().Add(p.t.cfg.dialTimeout))
	err = dialHandshake(c, p.t.secret, p.t.rank, p.rank)
	if !stop() && err == nil {
		err = transport.ErrClosed
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// settled reports whether the link is up or lost.
func (p *peer) settled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state >= up
}

// install takes our dialed, accepted connection.
func (p *peer) install(c *net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state >= up || !p.upLocked(c) {
		c.Close()
		return
	}
	p.t.logf("rank %d: connected to rank %d at %s", p.t.rank, p.rank, p.addr)
}

// accept decides on an authenticated incoming connection from this peer.
// It is accepted when there is no link yet, or when both dials are in
// flight and the peer, the dialer, is the lower rank.
func (p *peer) accept(c *net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := p.state == idle || p.state == dialing && p.rank < p.t.rank
	if !ok {
		c.Write([]byte{verdictReject})
		c.Close()
		p.t.logf("rank %d: rejected a second connection from rank %d (%s)", p.t.rank, p.rank, c.RemoteAddr())
		return
	}
	// Written under mu, so that no Send writes on c before the verdict.
	if _, err := c.Write([]byte{verdictAccept}); err != nil || !p.upLocked(c) {
		c.Close()
		return
	}
	p.t.logf("rank %d: accepted rank %d from %s", p.t.rank, p.rank, c.RemoteAddr())
}

// upLocked starts the reader of c and makes c the link. It fails only when
// the transport is closing. p.mu is held.
func (p *peer) upLocked(c *net.TCPConn) bool {
	c.SetDeadline(time.Time{})
	c.SetNoDelay(true)
	c.SetKeepAliveConfig(keepAlive)
	r, err := newReader(p, c)
	if err != nil {
		return false
	}
	// Published before the reader goroutine starts: it may leave data to
	// the pollers at once, and EndPoll's drain must then find r.
	p.rd.Store(r)
	p.t.ready.add(r, p.rank)
	// Both goroutines or neither: a reader goroutine left running on a
	// link that never came up would report the loss that fail reports
	// too, when Close came between the two (Lost twice). The reader ends
	// the writer (closing r.gone) once the connection is closed.
	if !p.t.spawn(r.run, func() { p.writeLoop(r) }) {
		r.retire()
		p.rd.Store(nil)
		return false
	}
	p.conn.Store(c)
	p.state = up
	close(p.ready)
	return true
}

// fail records err as the reason the peer is lost, unless one is recorded
// already, and returns the recorded reason. It reports the loss at once if
// the link never came up; an up link's reader reports it when it stops.
func (p *peer) fail(err error) error {
	return p.lose(err, false)
}

// giveUp is fail for a dial that failed: it does nothing if the link came
// up meanwhile (through the peer's own dial) or was lost otherwise.
func (p *peer) giveUp(err error) {
	p.lose(err, true)
}

func (p *peer) lose(err error, onlyDialing bool) error {
	if p.t.closed.Load() {
		err = p.closedErr // we are leaving: the peer was not lost
	}
	p.mu.Lock()
	if p.state == lost || onlyDialing && p.state != dialing {
		e := p.err
		p.mu.Unlock()
		return e
	}
	wasUp := p.state == up
	p.state, p.err = lost, err
	p.failed.Store(&failure{err})
	if !wasUp {
		close(p.ready)
	}
	p.mu.Unlock()
	p.t.logf("rank %d: lost %v", p.t.rank, err)
	p.abandon()
	if !wasUp && p.t.handler != nil {
		p.t.handler.Lost(p.rank, err)
	}
	return err
}

// shutdown is Close's part for this peer: mark it lost with ErrClosed and
// half-close the link, so the peer reads all we sent and closes its side,
// which ends our reader's drain.
func (p *peer) shutdown() {
	p.fail(p.closedErr)
	if c := p.conn.Load(); c != nil {
		// The writer goroutine, if it waits for room, stops waiting: its
		// frames failed with the peer.
		c.SetWriteDeadline(aLongTimeAgo)
		c.CloseWrite()
		c.SetReadDeadline(time.Now().Add(lingerTimeout))
	}
}
