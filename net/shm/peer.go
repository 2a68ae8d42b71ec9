package shm

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// Causes of losses, wrapped in transport.Lost errors.
var (
	errPeerClosed = errors.New("peer closed its shared-memory transport")
	errPeerBroke  = errors.New("peer abandoned a message half-written")
	errPeerDied   = errors.New("peer process exited")
	errRefused    = errors.New("peer refused our frames as corrupt")
)

// failure boxes a loss error for atomic publication.
type failure struct{ err error }

// peer is the link to one other rank of the host: the ring it produces into
// in our segment (in), and the ring we produce into in its segment (out).
type peer struct {
	t         *Transport
	rank      int
	closedErr error // returned by Send after Close, and reported by Close

	in   consumer // owned by the receiver goroutine
	gone bool     // Lost was reported; owned by the receiver until Close

	ready     chan struct{} // closed once the peer's segment is mapped or given up
	readyOnce sync.Once
	seg       atomic.Pointer[segment] // the peer's segment, once mapped
	fault     atomic.Pointer[failure] // why the link is unusable, once it is

	procMu sync.Mutex // protects following
	proc   process    // pid 0 until known

	sendMu     sync.Mutex // serialises Sends; protects following
	out        producer
	sendClosed bool
	w          waiter
	nextSlot   uint32 // where claimSlot looks for a free offer slot first

	offerMu sync.Mutex    // protects following
	offers  []startedSend // started single-copy sends not taken yet
}

func newPeer(t *Transport, r int) *peer {
	p := &peer{
		t:         t,
		rank:      r,
		closedErr: &transport.PeerError{Rank: r, Addr: addr, Err: transport.ErrClosed},
		ready:     make(chan struct{}),
		proc:      process{fd: -1},
	}
	p.in = consumer{r: t.seg.ring(t.slot(t.rank, r)), peer: r, t: t}
	c := p.in.r.c
	p.in.freed = func() {
		if c.spaceWait.Load() != 0 && c.spaceWait.CompareAndSwap(1, 0) {
			c.spaceSeq.Add(1)
			wake(&c.spaceSeq)
		}
	}
	p.in.taken = func() { // the producer may wait in Request.Wait for a started send
		if s := p.seg.Load(); s != nil {
			s.ringBell()
		}
	}
	return p
}

// attachAll maps every peer's segment as it appears, until all are mapped
// or given up, or the transport closes.
func (t *Transport) attachAll() {
	pending := slices.Clone(t.order)
	deadline := time.Now().Add(t.cfg.attachTimeout)
	delay := time.Millisecond
	for {
		pending = slices.DeleteFunc(pending, (*peer).tryAttach)
		if len(pending) == 0 {
			return
		}
		if !time.Now().Before(deadline) {
			for _, p := range pending {
				p.giveUp(fmt.Errorf("its segment did not appear within %v", t.cfg.attachTimeout))
			}
			return
		}
		select {
		case <-t.ctx.Done():
			for _, p := range pending {
				p.settle()
			}
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// tryAttach maps the peer's segment if it exists; it reports whether the
// peer is settled, attached or given up.
func (p *peer) tryAttach() bool {
	t := p.t
	if p.failed() != nil { // reported lost meanwhile
		p.settle()
		return true
	}
	s, err := p.open()
	if errors.Is(err, errNotYet) {
		return false
	}
	if err != nil {
		p.giveUp(err)
		return true
	}
	p.sendMu.Lock()
	if p.sendClosed {
		p.sendMu.Unlock()
		s.unmap()
		p.settle()
		return true
	}
	r := s.ring(t.slot(p.rank, t.rank))
	p.out = producer{r: r, tail: r.c.tail.Load(), head: r.c.head.Load()}
	r.c.prodPid.Store(uint32(os.Getpid()))
	r.c.prodState.Store(endOpen)
	p.seg.Store(s)
	p.sendMu.Unlock()
	s.hdr.attached.Add(1)
	s.alarm() // the owner unlinks its file once every peer is in
	p.alive() // opens its process handle, and has its exit watched, now
	p.settle()
	t.logf("rank %d: attached to rank %d at %s", t.rank, p.rank, s.path)
	return true
}

// open maps the peer's segment.
func (p *peer) open() (*segment, error) {
	t := p.t
	mac := segmentMAC(t.secret, t.jobID, p.rank, t.cfg.ringSize, t.local)
	return openSegment(segmentPath(t.cfg.dir, t.jobID, p.rank, t.secret), len(t.local)-1, t.cfg.ringSize, mac)
}

// closeUnattached is Close's part for a peer whose segment we never mapped:
// if it exists now, mark our ring in it closed, so that the peer sees our
// close at once instead of waiting for a segment that is gone.
func (p *peer) closeUnattached() {
	if p.seg.Load() != nil {
		return
	}
	s, err := p.open()
	if err != nil {
		return
	}
	c := s.ring(p.t.slot(p.rank, p.t.rank)).c
	c.prodPid.Store(uint32(os.Getpid()))
	c.prodState.Store(endClosed)
	s.hdr.attached.Add(1)
	s.alarm()
	s.unmap()
}

// giveUp records that the peer's segment cannot be used and has the
// receiver report the loss.
func (p *peer) giveUp(err error) {
	err = p.setFault(transport.Lost(p.rank, addr, fmt.Errorf("attach: %w", err)))
	p.t.logf("rank %d: %v", p.t.rank, err)
	p.settle()
	p.t.seg.alarm()
}

func (p *peer) settle() { p.readyOnce.Do(func() { close(p.ready) }) }

// setFault records err as why the link is unusable, unless a reason is
// recorded already, and returns the recorded reason.
func (p *peer) setFault(err error) error {
	if p.fault.CompareAndSwap(nil, &failure{err}) {
		return err
	}
	return p.fault.Load().err
}

func (p *peer) failed() error {
	if f := p.fault.Load(); f != nil {
		return f.err
	}
	return nil
}

// alive reports whether the peer's process still runs, as far as is known.
func (p *peer) alive() bool {
	p.procMu.Lock()
	defer p.procMu.Unlock()
	if p.proc.pid == 0 {
		pid := p.in.r.c.prodPid.Load()
		if s := p.seg.Load(); pid == 0 && s != nil {
			pid = s.hdr.pid
		}
		if int32(pid) <= 0 {
			return true
		}
		p.proc = openProcess(int(pid))
		if p.proc.fd >= 0 && int(pid) != os.Getpid() { // a peer in this process ends with it
			p.t.watchExit(p.proc.fd)
		}
	}
	return p.proc.alive()
}

// closeSend is Close's part for the sending side: wake a Send that waits
// for space, then mark our ring in the peer's segment closed (or broken,
// if a frame is half-written) and wake the peer.
func (p *peer) closeSend() {
	if s := p.seg.Load(); s != nil {
		c := s.ring(p.t.slot(p.rank, p.t.rank)).c
		c.spaceSeq.Add(1)
		wake(&c.spaceSeq)
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	p.sendClosed = true
	if s := p.seg.Load(); s != nil {
		state := uint32(endClosed)
		if p.out.off > 0 && p.out.off < p.out.total {
			state = endBroken
		}
		p.out.r.c.prodState.CompareAndSwap(endOpen, state)
		s.alarm()
	}
}

// closeReceive is Close's part for the receiving side: the peer's Sends
// fail from now on, including one that waits for space.
func (p *peer) closeReceive() {
	c := p.in.r.c
	if c.consState.Load() != endBroken {
		c.consState.Store(endClosed)
	}
	c.spaceSeq.Add(1)
	wake(&c.spaceSeq)
}

// release unmaps the peer's segment and closes its process handle. Close
// calls it once the goroutines have stopped.
func (p *peer) release() {
	p.sendMu.Lock()
	if s := p.seg.Swap(nil); s != nil {
		s.unmap()
	}
	p.sendMu.Unlock()
	p.procMu.Lock()
	p.proc.close()
	p.proc = process{fd: -1} // nothing asks alive() after Close
	p.procMu.Unlock()
}
