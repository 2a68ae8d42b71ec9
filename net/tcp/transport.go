package tcp

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// DefaultDialTimeout is how long a rank keeps dialing a peer that refuses
// connections (it may still be starting) before it reports the peer lost.
const DefaultDialTimeout = 10 * time.Second

// lingerTimeout bounds how long Close waits for a peer to finish reading
// and close its side after this rank half-closed the connection.
const lingerTimeout = time.Second

var _ transport.Transport = (*Transport)(nil)

// Option configures a Transport.
type Option func(*config)

type config struct {
	logger      *log.Logger
	dialTimeout time.Duration
}

// WithLogger logs connection steps (dials, accepts, refusals, losses) to
// logger. A nil logger, the default, keeps the transport silent.
func WithLogger(logger *log.Logger) Option {
	return func(c *config) { c.logger = logger }
}

// WithDialTimeout sets how long to keep dialing a peer before reporting it
// lost; d <= 0 keeps DefaultDialTimeout. It also bounds each handshake.
func WithDialTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.dialTimeout = d
		}
	}
}

// Transport is one rank's TCP data plane. Send and Watch are safe for
// concurrent use (Sends to one peer are serialised); Start is called once,
// Close any number of times.
type Transport struct {
	ln     *Listener
	rank   int
	secret []byte
	cfg    config
	peers  []*peer // by rank; peers[rank] is nil
	bad    error   // why New's arguments cannot work, returned by Start

	ctx    context.Context // cancelled by Close: stops dials and handshakes
	cancel context.CancelFunc

	handler transport.Handler // set by Start before any goroutine runs
	started atomic.Bool
	closed  atomic.Bool
	pollers atomic.Int32 // goroutines between BeginPoll and EndPoll
	ready   *readySet    // made by Start

	mu       sync.Mutex // protects following
	stopping bool       // no new goroutines once set
	wg       sync.WaitGroup

	closeOnce sync.Once
}

// New builds the transport of rank rank. addrs[i] is the listener address
// of rank i, as its Listener's Addr reported it; secret is the per-job
// secret that every connection must prove. The transport owns l from now
// on: Close closes it. Argument errors are reported by Start.
func New(l *Listener, rank int, addrs []string, secret []byte, opts ...Option) *Transport {
	cfg := config{dialTimeout: DefaultDialTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		ln:     l,
		rank:   rank,
		secret: append([]byte(nil), secret...),
		cfg:    cfg,
		ctx:    ctx,
		cancel: cancel,
	}
	switch {
	case l == nil:
		t.bad = errors.New("tcp: New needs the Listener from Listen")
	case rank < 0 || rank >= len(addrs):
		t.bad = fmt.Errorf("tcp: rank %d is outside a job of %d addresses", rank, len(addrs))
	case len(secret) == 0:
		t.bad = errors.New("tcp: the job secret is empty; connections could not be authenticated")
	}
	t.peers = make([]*peer, len(addrs))
	for i, a := range addrs {
		if i != rank {
			t.peers[i] = newPeer(t, i, a)
		}
	}
	return t
}

// Start begins accepting connections and delivering what arrives to h.
func (t *Transport) Start(h transport.Handler) error {
	if t.bad != nil {
		return t.bad
	}
	if h == nil {
		return errors.New("tcp: Start needs a Handler")
	}
	if t.closed.Load() {
		return fmt.Errorf("tcp: start: %w", transport.ErrClosed)
	}
	if t.started.Swap(true) {
		return errors.New("tcp: Start called twice")
	}
	t.handler = h
	t.ready = newReadySet(len(t.peers))
	if !t.spawn(t.acceptLoop) {
		return fmt.Errorf("tcp: start: %w", transport.ErrClosed)
	}
	t.logf("rank %d listening on %s", t.rank, t.ln.Addr())
	return nil
}

// Watch makes sure that the loss of peer will be noticed: it starts a dial
// in the background if there is no connection yet. It does not block, and
// does nothing before Start.
func (t *Transport) Watch(peer int) {
	if p, err := t.peer(peer); err == nil && t.started.Load() {
		p.ensureDial()
	}
}

// Close stops the listener, half-closes every connection so that peers read
// what was already sent, reports every peer not yet lost as lost with
// transport.ErrClosed, and waits for the transport's goroutines.
func (t *Transport) Close() error {
	t.closeOnce.Do(t.close)
	return nil
}

func (t *Transport) close() {
	t.closed.Store(true)
	t.mu.Lock()
	t.stopping = true
	t.mu.Unlock()
	t.cancel()
	if t.ln != nil {
		t.ln.Close()
	}
	for _, p := range t.peers {
		if p != nil {
			p.shutdown()
		}
	}
	t.wg.Wait()
	if t.ready != nil {
		t.ready.close()
	}
	t.logf("rank %d closed", t.rank)
}

// peer returns the state of rank r, or an error if r is not a peer.
func (t *Transport) peer(r int) (*peer, error) {
	if r < 0 || r >= len(t.peers) || t.peers[r] == nil {
		return nil, fmt.Errorf("tcp: rank %d is not a peer of rank %d in a job of %d", r, t.rank, len(t.peers))
	}
	return t.peers[r], nil
}

// spawn runs each of fs in a goroutine that Close waits for; it reports
// false, and runs none of them, once Close has begun.
func (t *Transport) spawn(fs ...func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopping {
		return false
	}
	t.wg.Add(len(fs))
	for _, f := range fs {
		go func() {
			defer t.wg.Done()
			f()
		}()
	}
	return true
}

func (t *Transport) logf(format string, args ...any) {
	if t.cfg.logger != nil {
		t.cfg.logger.Printf("tcp: "+format, args...)
	}
}
