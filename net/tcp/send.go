package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// aLongTimeAgo is a write deadline in the past: it interrupts a blocked
// write at once.
var aLongTimeAgo = time.Unix(1, 0)

// sender is the per-peer send state, reused by every Send and TrySend so
// that they allocate nothing. It is guarded by peer.sendMu.
type sender struct {
	p           *peer
	hdr         [headerSize]byte
	iov         [2][]byte
	bufs        net.Buffers
	interrupt   func()        // sets a past write deadline on the link
	interrupted chan struct{} // receives once interrupt has run
	deadlineSet bool          // the link's write deadline must be cleared

	writev func(fd uintptr) // TrySend's writev, built once
	n      int              // what writev returned
	werr   error
	rest   []byte // what a partial TrySend left to write
}

func (s *sender) init(p *peer) {
	s.p = p
	s.writev = s.writevOn
	s.interrupted = make(chan struct{}, 1)
	s.interrupt = func() {
		if c := p.conn.Load(); c != nil {
			c.SetWriteDeadline(aLongTimeAgo)
		}
		s.interrupted <- struct{}{}
	}
}

// Send writes one message to peer and returns once payload may be reused.
// h.Len must equal len(payload). Sends to one peer are serialised and
// arrive in order. Cancelling ctx interrupts a blocked write; if part of the
// frame had already gone out, the link is dropped and the peer reported
// lost, since the stream can no longer be framed.
func (t *Transport) Send(ctx context.Context, peer int, h transport.Header, payload []byte) error {
	p, err := t.peer(peer)
	if err != nil {
		return err
	}
	if h.Len != len(payload) {
		return fmt.Errorf("tcp: send to rank %d: header says %d bytes, payload has %d", peer, h.Len, len(payload))
	}
	if t.closed.Load() {
		return p.closedErr
	}
	if !t.started.Load() {
		return fmt.Errorf("tcp: send to rank %d before Start", peer)
	}
	if f := p.failed.Load(); f != nil {
		return f.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := p.conn.Load()
	if c == nil {
		if c, err = p.connect(ctx); err != nil {
			return err
		}
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	return p.sender.write(ctx, c, h, payload)
}

// write sends header and payload with one writev. p.sendMu is held.
func (s *sender) write(ctx context.Context, c *net.TCPConn, h transport.Header, payload []byte) error {
	if f := s.p.failed.Load(); f != nil {
		return f.err
	}
	putHeader(s.hdr[:], h)
	s.iov[0], s.iov[1] = s.hdr[:], payload
	s.bufs = s.iov[:]
	var n int64
	var err error
	if ctx.Done() == nil {
		s.clearDeadline(c)
		n, err = s.bufs.WriteTo(c)
	} else {
		n, err = s.writeWatched(ctx, c)
	}
	s.iov[1] = nil // do not keep the caller's payload alive
	if err == nil {
		return nil
	}
	return s.failed(ctx, c, n, int64(headerSize+len(payload)), err)
}

// probeTime is how long a Send with a cancellable context writes before it
// starts watching the context: most writes finish well within it, so they
// pay for one deadline update and no context.AfterFunc.
const probeTime = 5 * time.Millisecond

// writeWatched writes s.bufs so that cancelling ctx interrupts a write that
// blocks, because the peer reads slowly or not at all.
func (s *sender) writeWatched(ctx context.Context, c *net.TCPConn) (int64, error) {
	c.SetWriteDeadline(time.Now().Add(probeTime))
	s.deadlineSet = true
	n, err := s.bufs.WriteTo(c)
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, err
	}
	// Blocked past the probe: clear the deadline, then let ctx set one.
	s.clearDeadline(c)
	stop := context.AfterFunc(ctx, s.interrupt)
	m, err := s.bufs.WriteTo(c)
	if !stop() {
		<-s.interrupted // interrupt ran: clear its deadline next time
		s.deadlineSet = true
	}
	return n + m, err
}

func (s *sender) clearDeadline(c *net.TCPConn) {
	if s.deadlineSet {
		c.SetWriteDeadline(time.Time{})
		s.deadlineSet = false
	}
}

// failed handles a write error: a write interrupted before its first byte
// leaves the link intact; any other drops it.
func (s *sender) failed(ctx context.Context, c *net.TCPConn, n, total int64, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
		if n == 0 {
			return ctx.Err()
		}
		err = fmt.Errorf("send cancelled after %d of %d bytes, which leaves the stream unframed: %w",
			n, total, ctx.Err())
	}
	err = s.p.fail(transport.Lost(s.p.rank, s.p.addr, err))
	c.Close()
	return err
}
