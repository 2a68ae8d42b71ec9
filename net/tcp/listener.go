package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Listener is a rank's data-plane listening socket. It is opened before the
// ranks know each other's addresses, and handed to New.
type Listener struct {
	ln *net.TCPListener
}

// Listen opens the data-plane listener on addr: "127.0.0.1:0", or an
// interface IP with port 0 or a fixed port.
func Listen(addr string) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen on %s: %w", addr, err)
	}
	return &Listener{ln: ln.(*net.TCPListener)}, nil
}

// Addr returns the "ip:port" actually bound, to publish to the peers.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close closes the listening socket. A Transport built on l closes it
// itself; call Close only for a Listener that never reached New.
func (l *Listener) Close() error { return l.ln.Close() }

// acceptLoop accepts connections until Close and authenticates each in a
// goroutine of its own, so that a silent stranger holds up nobody.
func (t *Transport) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := t.ln.ln.AcceptTCP()
		if err != nil {
			if t.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			t.logf("rank %d: accept: %v (retrying in %v)", t.rank, err, backoff)
			if !t.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !t.spawn(func() { t.serve(c) }) {
			c.Close()
			return
		}
	}
}

// serve authenticates one incoming connection and, if its rank is a peer
// that should use it, hands it over.
func (t *Transport) serve(c *net.TCPConn) {
	stop := context.AfterFunc(t.ctx, func() { c.Close() })
	c.SetDeadline(time.Now().Add(t.cfg.dialTimeout))
	from, err := acceptHandshake(c, t.secret, t.rank, len(t.peers))
	if err != nil {
		stop()
		c.Close()
		t.logf("rank %d: refused connection from %s: %v", t.rank, c.RemoteAddr(), err)
		return
	}
	if !stop() {
		c.Close() // closing
		return
	}
	t.peers[from].accept(c)
}

// sleep waits for d, or reports false if the transport is closed first.
func (t *Transport) sleep(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-t.ctx.Done():
		return false
	}
}
