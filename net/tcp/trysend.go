package tcp

import (
	"errors"
	"fmt"
	"net"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

// trySendMax is the largest payload TrySend takes on. A write that the
// socket takes only in part leaves the rest to a goroutine, which copies
// it; the bound keeps that copy small. A larger message moves long enough
// that the goroutine spmd's Isend starts for it costs little.
const trySendMax = 64 << 10

var _ transport.TrySender = (*Transport)(nil)

// TrySend implements transport.TrySender: when the link to peer is up and
// no other send is writing on it, it writes a message of at most 64 KiB
// with one non-blocking writev on the calling goroutine, so that a small
// Isend needs no goroutine. If the socket takes only part of the frame, a
// goroutine of the transport writes the rest from a copy, and later sends
// to peer wait for it. TrySend reports false, having written nothing, when
// the socket has no room, the link is not up or busy, and for anything
// that Send would reject: Send then does the work and reports the error.
func (t *Transport) TrySend(peer int, h transport.Header, payload []byte) (bool, error) {
	p, err := t.peer(peer)
	if err != nil || h.Len != len(payload) || len(payload) > trySendMax ||
		!t.started.Load() || t.closed.Load() || p.failed.Load() != nil {
		return false, nil
	}
	r := p.rd.Load()
	if r == nil || !p.sendMu.TryLock() {
		return false, nil
	}
	return p.sender.try(r, h, payload), nil
}

// try writes the frame on r's connection with one non-blocking writev.
// p.sendMu is held; try releases it, or hands it to the goroutine that
// finishes a partial write.
func (s *sender) try(r *reader, h transport.Header, payload []byte) bool {
	putHeader(s.hdr[:], h)
	s.iov[0], s.iov[1] = s.hdr[:], payload
	s.n, s.werr = 0, nil
	err := r.rc.Control(s.writev)
	s.iov[1] = nil // do not keep the caller's payload alive
	switch n, total := s.n, headerSize+len(payload); {
	case err == nil && s.werr == nil && n == total:
		s.p.sendMu.Unlock()
		return true
	case err != nil || s.werr != nil || n <= 0:
		// Nothing went out (no room, or the link failed): Send will wait
		// for room, or meet the failure and report it.
		s.p.sendMu.Unlock()
		return false
	default:
		// The stream holds part of the frame: the rest must follow before
		// anything else, and the caller may reuse payload once we return.
		s.rest = append(append(s.rest[:0], s.hdr[min(n, headerSize):]...), payload[max(n-headerSize, 0):]...)
		if !s.p.t.spawn(func() { s.finish(r.c) }) {
			s.drop(r.c, errors.New("transport closed with a frame half-written"))
			s.p.sendMu.Unlock()
		}
		return true
	}
}

// finish writes the rest of a frame that try began, waiting for the peer
// to make room, then releases p.sendMu, which it holds. Close does not
// wait for it long: once Close's linger ends the reader goroutine, that
// closes c, which fails the write.
func (s *sender) finish(c *net.TCPConn) {
	defer s.p.sendMu.Unlock()
	s.clearDeadline(c)
	if _, err := c.Write(s.rest); err != nil {
		s.drop(c, fmt.Errorf("finishing a non-blocking send: %w", err))
	}
}

// drop fails the link, whose stream can no longer be framed. p.sendMu is
// held.
func (s *sender) drop(c *net.TCPConn, err error) {
	s.p.fail(transport.Lost(s.p.rank, s.p.addr, err))
	c.Close()
}

// writevOn is try's callback inside RawConn.Control.
func (s *sender) writevOn(fd uintptr) {
	s.n, s.werr = unix.Writev(int(fd), s.iov[:])
}
