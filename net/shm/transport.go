package shm

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// DefaultRingSize is the data size of each ring, one per ordered pair of
// ranks on a host. From BenchmarkRingSize on a 2-core host (medians of 3,
// MB/s for 64 KiB / 16 MiB messages): 256 KiB 3170 / 1710, 1 MiB 5280 /
// 2200, 4 MiB 6400 / 2300. 256 KiB is clearly slower; 1 MiB comes within
// noise of 4 MiB for large messages with a quarter of the memory, which
// counts with 8 ranks on a host (56 rings).
const DefaultRingSize = 1 << 20

// DefaultAttachTimeout is how long a rank waits for a peer's segment to
// appear before it reports the peer lost.
const DefaultAttachTimeout = 10 * time.Second

// addr is the address PeerErrors name for shared-memory peers.
const addr = "shm"

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Poller    = (*Transport)(nil)
	_ transport.TrySender = (*Transport)(nil)
	_ transport.Starter   = (*Transport)(nil)
)

// Option configures a Transport.
type Option func(*config)

type config struct {
	ringSize      int
	attachTimeout time.Duration
	spin          int
	singleCopy    int  // smallest payload sent by single copy; 0: never
	hugePages     bool // collapse memory sent from again and again (hugepager)
	logger        *log.Logger
	dir           string
}

// WithRingSize sets the data size of each ring: a power of two from 4 KiB
// to 1 GiB. Every rank of a host must use the same size.
func WithRingSize(n int) Option { return func(c *config) { c.ringSize = n } }

// WithAttachTimeout sets how long to wait for a peer's segment before
// reporting it lost; d <= 0 keeps DefaultAttachTimeout.
func WithAttachTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.attachTimeout = d
		}
	}
}

// WithSpin sets how many polls, with runtime.Gosched between them, a
// waiting side makes before it blocks on a futex. By default it is
// DefaultSpin, or OversubscribedSpin when the host's ranks outnumber the
// cores this process may run on. n < 0 keeps the default; 0 blocks at once.
func WithSpin(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.spin = n
		}
	}
}

// WithLogger logs attaches, refusals and losses to logger. A nil logger,
// the default, keeps the transport silent.
func WithLogger(logger *log.Logger) Option { return func(c *config) { c.logger = logger } }

// Transport is one rank's shared-memory data plane to the other ranks of
// its host. Send and Watch are safe for concurrent use (Sends to one peer
// are serialised); Start is called once, Close any number of times.
type Transport struct {
	jobID  string
	rank   int
	local  []int // the host's ranks, sorted
	secret []byte
	cfg    config
	seg    *segment // this rank's inbox; nil when it is alone on its host
	peers  []*peer  // by world rank; nil for self and ranks of other hosts
	order  []*peer  // the local peers, in rank order

	handler transport.Handler // set by Start before any goroutine runs

	// consume is the rings' consumer side: held by whoever polls them, the
	// receiver or a goroutine in Poll, and guards what polling and the
	// receiver's checks touch (the peers' gone state, unlinked).
	consume sync.Mutex
	polled  bool        // a Poll of the current polling session delivered something
	linger  *time.Timer // ends a lingering poller's registration (endLinger)
	// lingering says that the last poller left but its count is kept for
	// lingerFor, so that senders do not ring the doorbell for a message the
	// next poll will take anyway.
	lingering bool
	// The timer is not reset by every EndPoll (a Reset per message cost
	// more than the rest of EndPoll): while armed, a new linger only bumps
	// lingers, and endLinger arms the timer again when the linger it finds
	// is not the one it was armed for. A linger so lasts lingerFor to twice
	// that.
	armed    bool
	lingers  uint64       // lingers begun
	armedFor uint64       // lingers when the timer was armed
	offering atomic.Int32 // started single-copy sends not taken yet, all peers
	huge     hugepager
	// takers counts the goroutines copying an offer out of a peer's
	// memory (offer.Take), which touches our segment: Close waits for
	// them before it unmaps it.
	takers   atomic.Int32
	started  atomic.Bool
	closing  atomic.Bool
	unlinked bool // the segment's file is gone; owned by the receiver until Close

	// The peers' processes whose exit a goroutine waits for (watchExit).
	watchMu sync.Mutex
	watches []*os.File   // guarded by watchMu: the pidfds waited on
	watched atomic.Int32 // peers watched
	exited  atomic.Bool  // a watched process exited: check the peers

	ctx    context.Context // cancelled by Close: stops attaching
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once

	shareMu sync.Mutex
	shares  map[string][]byte // guarded by shareMu: the areas Share mapped, by key, with their headers
}

// New creates the shared-memory transport of rank in a job of size ranks,
// for its peers in local: the world ranks on this host, rank included. It
// creates the rank's segment under /dev/shm at once; the host's ranks may
// call New at different times, since each waits (up to the attach timeout)
// for the others' segments from Start on. secret is the
// per-job secret: only holders of it find and accept the segments.
func New(jobID string, rank int, local []int, size int, secret []byte, opts ...Option) (*Transport, error) {
	cfg := config{ringSize: DefaultRingSize, attachTimeout: DefaultAttachTimeout, spin: DefaultSpin,
		singleCopy: DefaultSingleCopy, hugePages: true, dir: Dir}
	if len(local) > contract.HostCPUs() {
		cfg.spin = OversubscribedSpin
	}
	for _, o := range opts {
		o(&cfg)
	}
	local = slices.Sorted(slices.Values(local))
	if err := checkArgs(jobID, rank, local, size, secret, cfg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		jobID: jobID, rank: rank, local: local, secret: slices.Clone(secret), cfg: cfg,
		peers: make([]*peer, size), ctx: ctx, cancel: cancel,
	}
	t.huge.off = !cfg.hugePages
	if len(local) > 1 {
		mac := segmentMAC(secret, jobID, rank, cfg.ringSize, local)
		s, err := createSegment(segmentPath(cfg.dir, jobID, rank, secret), len(local)-1, cfg.ringSize, mac)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("shm: rank %d: %w", rank, err)
		}
		t.seg = s
	}
	for _, r := range local {
		if r != rank {
			p := newPeer(t, r)
			t.peers[r] = p
			t.order = append(t.order, p)
		}
	}
	return t, nil
}

func checkArgs(jobID string, rank int, local []int, size int, secret []byte, cfg config) error {
	if err := checkJobID(jobID); err != nil {
		return err
	}
	switch {
	case rank < 0 || rank >= size:
		return fmt.Errorf("shm: rank %d is outside a job of %d ranks", rank, size)
	case !slices.Contains(local, rank):
		return fmt.Errorf("shm: the ranks of this host %v do not include rank %d", local, rank)
	case local[0] < 0 || local[len(local)-1] >= size || len(slices.Compact(slices.Clone(local))) != len(local):
		return fmt.Errorf("shm: the ranks of this host %v are not distinct ranks of a job of %d", local, size)
	case len(secret) == 0:
		return errors.New("shm: the job secret is empty; segments could not be authenticated")
	case cfg.ringSize < 4096 || cfg.ringSize > 1<<30 || cfg.ringSize&(cfg.ringSize-1) != 0:
		return fmt.Errorf("shm: ring size %d: want a power of two from 4 KiB to 1 GiB", cfg.ringSize)
	}
	return nil
}

// slot is the index of sender's ring in owner's segment: the rings follow
// the host's ranks in order, skipping the owner.
func (t *Transport) slot(owner, sender int) int {
	i, _ := slices.BinarySearch(t.local, sender)
	if sender > owner {
		i--
	}
	return i
}

// Start begins attaching to the peers' segments and delivering what
// arrives to h.
func (t *Transport) Start(h transport.Handler) error {
	if h == nil {
		return errors.New("shm: Start needs a Handler")
	}
	if t.closing.Load() {
		return fmt.Errorf("shm: start: %w", transport.ErrClosed)
	}
	if t.started.Swap(true) {
		return errors.New("shm: Start called twice")
	}
	t.handler = h
	arriver, _ := h.(transport.Arriver)
	for _, p := range t.order {
		p.in.arriver = arriver
	}
	if len(t.order) > 0 {
		t.wg.Add(2)
		go func() { defer t.wg.Done(); t.attachAll() }()
		go func() { defer t.wg.Done(); t.receive() }()
	}
	return nil
}

// Watch implements transport.Transport. Every peer of the host is watched
// from Start on, so it has nothing to add.
func (t *Transport) Watch(int) {}

// Close marks this rank's rings closed, so that peers see a clean close at
// once (after reading what was already sent), stops the transport's
// goroutines, reports every peer not yet lost as lost with
// transport.ErrClosed, unmaps the segments and removes this rank's file.
// enter admits a goroutine that takes an offer, unless the transport is
// closing; exit lets it go. A nil t (tests of the framing) admits all.
func (t *Transport) enter() bool {
	if t == nil {
		return true
	}
	t.takers.Add(1)
	if t.closing.Load() {
		t.takers.Add(-1)
		return false
	}
	return true
}

func (t *Transport) exit() {
	if t != nil {
		t.takers.Add(-1)
	}
}

func (t *Transport) Close() error {
	t.closeOnce.Do(t.close)
	return nil
}

func (t *Transport) close() {
	t.closing.Store(true)
	t.cancel()
	for _, p := range t.order {
		p.closeSend()
	}
	if t.seg != nil {
		t.seg.hdr.state.Store(stateClose)
		for _, p := range t.order {
			p.closeReceive()
		}
		t.seg.alarm()
	}
	t.stopWatches()
	t.wg.Wait()
	for t.takers.Load() != 0 { // an offer being taken touches our rings
		time.Sleep(50 * time.Microsecond)
	}
	// A goroutine in Poll finishes before the rings are unmapped; later
	// ones see closing under the lock and leave them alone.
	t.consume.Lock()
	defer t.consume.Unlock()
	if t.linger != nil {
		t.linger.Stop()
	}
	if t.started.Load() {
		for _, p := range t.order {
			if !p.gone {
				p.gone = true
				t.handler.Lost(p.rank, p.closedErr)
			}
			p.failOffers(p.closedErr)
		}
	}
	for _, p := range t.order {
		p.closeUnattached()
		p.release()
	}
	if t.seg != nil {
		if !t.unlinked {
			t.seg.unlink()
		}
		t.seg.unmap()
	}
	if s := t.huge.summary(); s != (hugeStats{}) {
		t.logf("rank %d: %v", t.rank, s)
	}
	t.logf("rank %d closed", t.rank)
}

// peer returns the state of rank r, or an error if r is not a peer.
func (t *Transport) peer(r int) (*peer, error) {
	if r < 0 || r >= len(t.peers) || t.peers[r] == nil {
		return nil, fmt.Errorf("shm: rank %d is not a peer of rank %d on this host (ranks %v)", r, t.rank, t.local)
	}
	return t.peers[r], nil
}

func (t *Transport) logf(format string, args ...any) {
	if t.cfg.logger != nil {
		t.cfg.logger.Printf("shm: "+format, args...)
	}
}
