package tcp

import (
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// trySendMax is the largest payload TrySend takes on. What the socket does
// not take at once is copied into the peer's queue; the bound keeps that
// copy small. A larger message goes through StartSend, which copies
// nothing.
const trySendMax = 64 << 10

var _ transport.TrySender = (*Transport)(nil)

// TrySend implements transport.TrySender: when the link to peer is up,
// nothing is queued for it and no other goroutine is writing on it, it
// writes a message of at most 64 KiB with one non-blocking writev on the
// calling goroutine. If the socket takes only part of the frame, the rest
// is copied to the head of the peer's queue, and later sends to peer
// follow it. TrySend reports false, having written nothing, when the
// socket has no room, the link is not up or busy, and for anything that
// Send would reject: Send then does the work and reports the error.
func (t *Transport) TrySend(peer int, h transport.Header, payload []byte) (bool, error) {
	if len(payload) > trySendMax {
		return false, nil
	}
	p, err := t.check(peer, h, payload)
	if err != nil {
		return false, nil
	}
	r := p.rd.Load()
	if r == nil {
		return false, nil
	}
	n := p.tryWrite(r, h, payload)
	if total := headerSize + len(payload); n > 0 && n < total {
		// The stream holds part of the frame: the rest must follow before
		// anything else, and the caller may reuse payload once we return.
		rest := make([]byte, 0, total-n)
		rest = append(append(rest, p.sender.hdr[min(n, headerSize):]...), payload[max(n-headerSize, 0):]...)
		o := outgoings.Get().(*outgoing)
		o.iov[0], o.iov[1] = nil, rest
		o.total, o.written = total, n
		p.pushFront(o)
		p.unlockSend()
		p.kick()
	}
	return n > 0, nil
}
