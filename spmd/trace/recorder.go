package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// fastSeqs is how many communicators' collectives are counted without
// the recorder's lock.
const fastSeqs = 64

// flushAt is how many encoded bytes the recorder holds before it writes
// them to its file.
const flushAt = 64 << 10

// flushEvery is how often the recorder writes what it holds however
// little that is, so that a rank killed (SIGKILL, os.Exit, a panic) leaves
// its events up to this long before it died, and its clock record. A DDP
// step can take 10 ms: with 100 ms a rank killed at its third step (ddp
// --crash-at 3) often left nothing after Init's barrier. A flush is one
// write of what built up since the last, under the lock.
const flushEvery = 20 * time.Millisecond

// Recorder streams one rank's events to its trace file. It is safe for
// concurrent use; every method of a nil Recorder does nothing.
type Recorder struct {
	path  string
	rank  int
	start time.Time
	clock func() time.Duration
	every time.Duration // how often flushLoop writes (flushEvery)

	stop     chan struct{} // closed to stop flushLoop
	stopOnce sync.Once
	flushed  chan struct{} // closed when flushLoop has returned

	// fastSeqs are the next collective indexes of the communicators with
	// the smallest ids, counted without the lock.
	fastSeqs [fastSeqs]atomic.Uint64

	mu sync.Mutex
	// protects following
	f       *os.File
	buf     []byte // encoded records not yet written
	scratch []byte // one record's payload
	strs    map[string]uint32
	sites   map[[siteDepth]uintptr]uint32
	recent  [recentSites]recentSite // sites looked up lately, by hash of their stack
	seqs    map[uint32]uint64       // the next collective's index, by communicator (ids from fastSeqs up)
	last    int64                   // the start of the last event written
	events  uint64
	lastMem int64 // when the heap was last sampled, if sampled
	sampled bool
	heap    []metrics.Sample // the sample it is read into
	err     error            // the first write error: later events are dropped
	closed  bool
}

// Option configures a Recorder.
type Option func(*Recorder)

// WithClock makes the recorder stamp events with now instead of the
// monotonic time since New. Tests use it to skew a rank's clock.
func WithClock(now func() time.Duration) Option {
	return func(r *Recorder) { r.clock = now }
}

// WithFlushEvery makes the recorder write what it holds every d instead of
// every 20 ms; 0 or less writes only when its buffer is full and at Close.
func WithFlushEvery(d time.Duration) Option {
	return func(r *Recorder) { r.every = d }
}

// FileName returns the name of rank's trace file in a profile directory.
func FileName(rank int) string { return fmt.Sprintf("rank.%d.trace", rank) }

// StartDir returns the directory in profile directory dir that holds the
// files of start k (GORUN_RESTART_COUNT) of a job gorun restarted
// (--max-restarts): when a later start opens its trace, each rank moves its
// files of the one before there, so that dir holds the last start's.
func StartDir(dir string, k int) string { return filepath.Join(dir, fmt.Sprintf("start.%d", k)) }

// New creates dir (if needed) and dir/rank.N.trace for h.Rank, writes the
// file's header and returns the recorder that streams into it.
func New(dir string, h Header, opts ...Option) (*Recorder, error) {
	if h.Size < 1 || h.Rank < 0 || h.Rank >= h.Size {
		return nil, fmt.Errorf("trace: rank %d of %d", h.Rank, h.Size)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	r := &Recorder{
		path:  filepath.Join(dir, FileName(h.Rank)),
		rank:  h.Rank,
		start: time.Now(),
		strs:  map[string]uint32{"": 0},
		sites: map[[siteDepth]uintptr]uint32{},
		seqs:  map[uint32]uint64{},
		every: flushEvery,
	}
	r.clock = func() time.Duration { return time.Since(r.start) }
	for _, o := range opts {
		o(r)
	}
	h.Version = Version
	h.Start = r.start
	if h.Pid == 0 {
		h.Pid = os.Getpid()
	}
	f, err := os.Create(r.path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	r.f = f
	hj, err := json.Marshal(h)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trace: %w", err)
	}
	r.buf = append(r.buf, Magic...)
	r.buf = appendRecord(r.buf, recHeader, hj)
	r.flushLocked()
	if r.err != nil {
		f.Close()
		return nil, r.err
	}
	r.stop, r.flushed = make(chan struct{}), make(chan struct{})
	go r.flushLoop()
	opened(r)
	return r, nil
}

// flushLoop writes the buffer every r.every until Close. It costs the
// events nothing: they find the lock taken at most once an interval, for
// one write of what built up since the last.
func (r *Recorder) flushLoop() {
	defer close(r.flushed)
	if r.every <= 0 {
		<-r.stop
		return
	}
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			if !r.closed {
				r.flushLocked()
			}
			r.mu.Unlock()
		}
	}
}

// Path returns the file the recorder writes.
func (r *Recorder) Path() string {
	if r == nil {
		return ""
	}
	return r.path
}

// Now returns the recorder's clock, in nanoseconds since it started.
func (r *Recorder) Now() int64 {
	if r == nil {
		return 0
	}
	return int64(r.clock())
}

// NextSeq returns the index of the next collective call on communicator
// comm: the n-th call on a communicator is the same call on every member.
func (r *Recorder) NextSeq(comm uint32) uint64 {
	if r == nil {
		return 0
	}
	if comm < fastSeqs {
		return r.fastSeqs[comm].Add(1) - 1
	}
	r.mu.Lock()
	s := r.seqs[comm]
	r.seqs[comm] = s + 1
	r.mu.Unlock()
	return s
}

// Comm records the members (world ranks, in communicator order) of
// communicator id.
func (r *Recorder) Comm(id uint32, members []int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.scratch[:0]
	p = appendUvarint(p, uint64(id))
	p = appendUvarint(p, uint64(len(members)))
	for _, m := range members {
		p = appendUvarint(p, uint64(m))
	}
	r.scratch = p
	r.put(recComm, p)
}

// SetClock records the rank's clock offset to rank 0 (add it to this
// rank's times to get rank 0's) and the round trip it was measured over.
func (r *Recorder) SetClock(offset, rtt time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := appendVarint(r.scratch[:0], int64(offset))
	p = appendUvarint(p, uint64(rtt))
	r.scratch = p
	r.put(recClock, p)
}

// Intern returns the id of s in the file's strings, writing it the first
// time.
func (r *Recorder) Intern(s string) uint32 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	id := r.internLocked(s)
	r.mu.Unlock()
	return id
}

func (r *Recorder) internLocked(s string) uint32 {
	if id, ok := r.strs[s]; ok {
		return id
	}
	if len(s) > maxString {
		s = s[:maxString] // a record the decoder takes
		if id, ok := r.strs[s]; ok {
			return id
		}
	}
	id := uint32(len(r.strs))
	r.strs[s] = id
	p := appendUvarint(r.scratch[:0], uint64(id))
	p = append(p, s...)
	r.scratch = p
	r.put(recString, p)
	return id
}

// Record writes e, whose Name and Algo are given as strings (they replace
// e.Name and e.Algo when not empty). A zero e.End is stamped now.
func (r *Recorder) Record(e Event, name, algo string) {
	if r == nil {
		return
	}
	if e.End == 0 {
		e.End = r.Now()
	}
	r.mu.Lock()
	if name != "" {
		e.Name = r.internLocked(name)
	}
	if algo != "" {
		e.Algo = r.internLocked(algo)
	}
	r.recordLocked(&e)
	r.mu.Unlock()
}

// RecordStack writes e, whose Name, Algo and Track are ids from Intern,
// with its call site taken from s when e.Site is not set, and returns the
// site's id; a zero e.End is stamped now. It is Record for a hot path:
// one lock, no string lookups.
func (r *Recorder) RecordStack(e Event, s *Stack) uint32 {
	if r == nil {
		return 0
	}
	if e.End == 0 {
		e.End = r.Now()
	}
	r.mu.Lock()
	if e.Site == 0 && s != nil {
		e.Site = r.siteLocked(s)
	}
	r.recordLocked(&e)
	r.mu.Unlock()
	return e.Site
}

func (r *Recorder) recordLocked(e *Event) {
	if e.Kind == 0 || e.Kind >= numKinds {
		return // the decoder would stop at it
	}
	p := r.scratch[:0]
	p = append(p, byte(e.Kind), byte(e.Flags))
	p = appendUvarint(p, uint64(e.Track))
	p = appendVarint(p, e.Start-r.last)
	p = appendUvarint(p, uint64(max(e.End-e.Start, 0)))
	switch e.Kind {
	case SendEvent, RecvEvent, WaitEvent:
		p = appendUvarint(p, uint64(e.Comm))
		p = appendVarint(p, int64(e.Peer))
		p = appendVarint(p, int64(e.Tag))
		p = appendUvarint(p, uint64(max(e.Bytes, 0)))
		p = appendUvarint(p, uint64(e.Site))
		p = appendUvarint(p, uint64(e.Name))
	case CollectiveEvent:
		p = appendUvarint(p, uint64(e.Comm))
		p = appendUvarint(p, uint64(e.Name))
		p = appendUvarint(p, uint64(e.Algo))
		p = appendUvarint(p, uint64(max(e.Bytes, 0)))
		p = appendUvarint(p, e.Seq)
		p = appendUvarint(p, uint64(max(e.Predicted, 0)))
		p = appendUvarint(p, uint64(e.Site))
	case RegionEvent:
		p = appendUvarint(p, uint64(e.Name))
	case MemoryEvent:
		p = appendUvarint(p, uint64(max(e.Bytes, 0)))
	}
	r.scratch = p
	r.last = e.Start
	r.events++
	r.put(recEvent, p)
}

// put appends a record and writes the buffer out once it is full.
func (r *Recorder) put(k byte, p []byte) {
	if r.closed || r.err != nil {
		return
	}
	r.buf = appendRecord(r.buf, k, p)
	if len(r.buf) >= flushAt {
		r.flushLocked()
	}
}

func (r *Recorder) flushLocked() {
	if len(r.buf) == 0 || r.err != nil {
		return
	}
	if _, err := r.f.Write(r.buf); err != nil {
		r.err = fmt.Errorf("trace: writing %s: %w", r.path, err)
	}
	r.buf = r.buf[:0]
}

// Close writes the end record and closes the file; later events are
// dropped. It returns the first write error, and is idempotent.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.flushed
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.err
	}
	p := appendUvarint(r.scratch[:0], r.events)
	p = appendUvarint(p, uint64(r.Now()))
	r.put(recEnd, p)
	r.flushLocked()
	r.closed = true
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = fmt.Errorf("trace: closing %s: %w", r.path, err)
	}
	closed(r)
	return r.err
}
