package spmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// Peer describes one rank of the world as the rendezvous found it.
type Peer struct {
	Rank     int
	HostID   string // identity of its host: ranks with equal HostID share a machine
	Hostname string
	Addr     string // data-plane address
	Pid      int
}

// core is what every communicator of one world shares.
type core struct {
	engine *engine
	tr     transport.Transport
	trace  *trace.Recorder
	log    *log.Logger
	peers  []Peer // by world rank

	mu sync.Mutex
	// protects following
	nextID uint32 // lowest communicator id this rank has not used
	// splits are the Splits under way on this rank; splitChanged is
	// closed (and replaced) when one ends an attempt.
	splits       map[*splitOp]bool
	splitChanged chan struct{}
	values       map[valueKey]any      // values attached to communicators
	shared       map[uint32]sharedArea // memory Comm.Shared mapped, by communicator

	// valuesGen counts the changes to values, so that a Comm's cache of
	// the values it was asked for knows when it is stale. Written under mu.
	valuesGen atomic.Uint64
}

// sharedArea is the memory Comm.Shared mapped for one communicator, and
// the key it was shared under.
type sharedArea struct {
	key string
	mem []byte
}

type valueKey struct {
	comm uint32
	key  any
}

// World is the job as one rank sees it: the world communicator (embedded,
// so w.Send and w.Barrier work on it) and what the launcher and rendezvous
// said about every rank. Close it when done.
type World struct {
	*Comm
	env   Env
	peers []Peer

	closeOnce sync.Once
	closeErr  error
	closers   []func() error // run in reverse order by Close
}

// Option configures Init and New.
type Option func(*options)

type options struct {
	getenv func(string) string
	ownEnv bool // getenv is os.Getenv: Init joins this process's job
	logger *log.Logger
	trace  *trace.Recorder
}

// WithGetenv makes Init read the launcher's environment through getenv
// instead of os.Getenv.
func WithGetenv(getenv func(string) string) Option {
	return func(o *options) { o.getenv, o.ownEnv = getenv, false }
}

// WithLogger logs rendezvous and connection steps to l.
func WithLogger(l *log.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithTrace records every message and collective in rec.
func WithTrace(rec *trace.Recorder) Option {
	return func(o *options) { o.trace = rec }
}

func collect(opts []Option) options {
	o := options{getenv: os.Getenv, ownEnv: true}
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = log.New(io.Discard, "", 0)
	}
	return o
}

// New builds the world of rank over a transport whose peers are described
// by peers (one per rank, in rank order), starts the transport and returns
// without any communication. Init uses it; tests build worlds over net/mem
// with it (see package spmdtest).
func New(tr transport.Transport, rank int, peers []Peer, opts ...Option) (*World, error) {
	o := collect(opts)
	size := len(peers)
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("spmd.New: rank %d of %d: %w", rank, size, ErrBadRank)
	}
	c := &core{engine: newEngine(rank, size, tr), tr: tr, trace: o.trace, log: o.logger, peers: peers, nextID: 2, values: map[valueKey]any{}}
	if err := tr.Start(c.engine); err != nil {
		return nil, fmt.Errorf("starting transport: %w", err)
	}
	ranks := make([]int, size)
	for i := range ranks {
		ranks[i] = i
	}
	w := &World{
		Comm:  newComm(c, 0, rank, ranks),
		peers: peers,
		env:   Env{Rank: rank, Size: size, LocalSize: 1, NodeCount: 1},
	}
	w.closers = append(w.closers, tr.Close, c.trace.Close)
	countWorld(1)
	return w, nil
}

// Peers returns what the rendezvous said about every rank, in rank order.
func (w *World) Peers() []Peer { return w.peers }

// Env returns the launcher's environment as this rank read it.
func (w *World) Env() Env { return w.env }

// LocalRank returns this rank's index among the ranks on its host.
func (w *World) LocalRank() int { return w.env.LocalRank }

// LocalSize returns the number of ranks on this rank's host.
func (w *World) LocalSize() int { return w.env.LocalSize }

// Hostname returns the name of this rank's host.
func (w *World) Hostname() string { return w.peers[w.Rank()].Hostname }

// HostID returns the identity of this rank's host.
func (w *World) HostID() string { return w.peers[w.Rank()].HostID }

// Close leaves the job: it writes the trace, closes the rendezvous and the
// transport, and fails every pending call with ErrClosed. Peers waiting on
// this rank then get ErrPeerLost. Close is idempotent.
func (w *World) Close() error {
	w.closeOnce.Do(func() {
		countWorld(-1)
		w.core.engine.close(ErrClosed)
		var errs []error
		for i := len(w.closers) - 1; i >= 0; i-- {
			if err := w.closers[i](); err != nil {
				errs = append(errs, err)
			}
		}
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}

// singleton is the world of a program run without gorun: one rank, whose
// messages to itself never touch a transport.
func singleton(o options) (*World, error) {
	host, _ := os.Hostname()
	peers := []Peer{{Rank: 0, HostID: contract.LocalHostID(), Hostname: host, Pid: os.Getpid()}}
	return New(selfOnly{}, 0, peers, WithLogger(o.logger), WithTrace(o.trace))
}

// selfOnly is the transport of a one-rank world: there is nobody to send to.
type selfOnly struct{}

func (selfOnly) Start(transport.Handler) error { return nil }
func (selfOnly) Send(_ context.Context, peer int, _ transport.Header, _ []byte) error {
	return fmt.Errorf("send to rank %d in a world of one: %w", peer, ErrBadRank)
}
func (selfOnly) Watch(int)    {}
func (selfOnly) Close() error { return nil }

// verboseOnly returns o's logger when the launcher asked for verbose logs,
// else nil, for the layers that log only in verbose mode.
func verboseOnly(env Env, o options) *log.Logger {
	if env.Verbose {
		return o.logger
	}
	return nil
}
