package shm

import (
	"runtime"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// receive is the rank's one receiving goroutine: it polls every incoming
// ring, spins a little when they are all empty, then sleeps on the
// segment's doorbell, which every sender rings after publishing while it
// sleeps. While a goroutine of the rank polls the rings itself (BeginPoll)
// the receiver keeps out of its way and sleeps. A timed-out sleep, and a
// busy receiver every checkEvery, checks that the peers' processes still
// exist.
func (t *Transport) receive() {
	var w waiter
	hdr := t.seg.hdr
	last := time.Now()
	spins, rounds := 0, 0
	var idle time.Time // when the spin began
	deep := false      // a nap passed with nothing: sleep on the doorbell
	for !t.closing.Load() {
		if hdr.pollers.Load() == 0 {
			t.consume.Lock()
			moved := t.pollAll()
			if t.reap() {
				moved = true
			}
			if moved {
				if rounds++; rounds%1024 == 0 && time.Since(last) >= checkEvery {
					t.check(true)
					last = time.Now()
				}
			}
			t.consume.Unlock()
			if moved {
				spins, deep = 0, false
				continue
			}
			if spins == 0 {
				idle = time.Now()
			}
			if spins < t.cfg.spin || t.cfg.spin >= DefaultSpin && time.Since(idle) < spinWindow {
				spins++
				runtime.Gosched()
				continue
			}
		}
		spins = 0
		state := uint32(napping)
		if deep {
			state = asleep
		}
		seq := hdr.bell.Load()
		hdr.sleeping.Store(state)
		if hdr.pollers.Load() == 0 && (t.pollLocked() || t.reap()) {
			hdr.sleeping.Store(awake)
			deep = false
			continue
		}
		t.checkLocked(false) // state changes signalled before seq was read
		if t.closing.Load() {
			return
		}
		var timedOut bool
		if deep {
			timedOut = t.seg.sleep(t.idleSleep())
		} else {
			timedOut = w.wait(&hdr.bell, seq, napFor)
		}
		hdr.sleeping.Store(awake)
		liveness := deep && timedOut || time.Since(last) >= checkEvery || t.exited.Swap(false)
		t.checkLocked(liveness)
		if liveness {
			last = time.Now()
		}
		// Nothing rang: sleep again at once, on the doorbell, without
		// the spin, whose Goscheds each wake an idle P's thread.
		deep = timedOut
		if timedOut {
			spins = t.cfg.spin
		}
	}
}

func (t *Transport) pollLocked() bool {
	t.consume.Lock()
	defer t.consume.Unlock()
	return !t.closing.Load() && t.pollAll()
}

func (t *Transport) checkLocked(liveness bool) {
	t.consume.Lock()
	defer t.consume.Unlock()
	t.check(liveness)
}

// lingerFor is the least time the last poller's registration outlives its
// EndPoll when its polls delivered something. A rank in a loop of
// exchanges polls again within a microsecond or two; meanwhile a peer's
// message would find no poller, ring the doorbell and wake the receiver's
// thread, which then took a core from the polling ranks. On 2 cores, a
// tenth of the 8-byte exchanges of 2 ranks rang it (20,000 futex wakes in
// 200,000 exchanges), and the slow tail of the exchanges (p99 60-130 us)
// came with it. A message that arrives while the registration lingers and
// nobody polls is delivered when it ends.
const lingerFor = 50 * time.Microsecond

// BeginPoll implements transport.Poller: from now on the receiver sleeps
// and senders do not wake it; the caller polls.
func (t *Transport) BeginPoll() {
	if t.seg == nil {
		return
	}
	t.consume.Lock()
	switch {
	case t.closing.Load():
	case t.lingering:
		t.lingering = false // take over the lingering registration
		t.polled = false
	default:
		if t.seg.hdr.pollers.Add(1) == 1 {
			t.polled = false
		}
	}
	t.consume.Unlock()
}

// Poll implements transport.Poller: it delivers what the rings hold on the
// calling goroutine, unless another goroutine is polling them.
func (t *Transport) Poll() bool {
	if t.seg == nil || !t.started.Load() || !t.consume.TryLock() {
		return false
	}
	defer t.consume.Unlock()
	if t.closing.Load() {
		return false
	}
	moved := t.pollAll()
	if t.reap() {
		moved = true
	}
	if moved {
		t.polled = true
	}
	return moved
}

// EndPoll implements transport.Poller. After the count drops, a sender no
// longer skips the doorbell; what was published before that is delivered
// by the final poll here (which waits for the lock: the holder may be the
// receiver about to sleep). The last poller of a session whose polls
// delivered something lingers instead (lingerFor): its count drops, and
// the final poll runs, when the linger ends, unless a new poller takes the
// registration over first.
func (t *Transport) EndPoll() {
	if t.seg == nil {
		return
	}
	t.consume.Lock()
	defer t.consume.Unlock()
	if t.closing.Load() {
		return
	}
	if t.polled && t.seg.hdr.pollers.Load() == 1 && t.started.Load() {
		t.pollAll()
		t.reap()
		t.lingering = true
		t.lingers++
		if !t.armed {
			t.arm()
		}
		return
	}
	t.unregister()
}

// unregister drops a poller's count and delivers what was published while
// it made senders skip the doorbell. t.consume is held.
func (t *Transport) unregister() {
	t.seg.hdr.pollers.Add(-1)
	if t.started.Load() {
		t.pollAll()
		t.reap()
	}
}

// arm starts the linger timer for the current linger. t.consume is held.
func (t *Transport) arm() {
	t.armed, t.armedFor = true, t.lingers
	if t.linger == nil {
		t.linger = time.AfterFunc(lingerFor, t.endLinger)
	} else {
		t.linger.Reset(lingerFor)
	}
}

// endLinger ends a lingering registration that no poller took over, once
// it has lasted lingerFor.
func (t *Transport) endLinger() {
	t.consume.Lock()
	defer t.consume.Unlock()
	t.armed = false
	if !t.lingering || t.closing.Load() {
		return
	}
	if t.lingers != t.armedFor { // a later linger: give it its time
		t.arm()
		return
	}
	t.lingering = false
	t.unregister()
}

// pollAll polls every incoming ring once and reports whether any moved.
func (t *Transport) pollAll() bool {
	moved := false
	for _, p := range t.order {
		if !p.gone && t.poll(p) {
			moved = true
		}
	}
	return moved
}

// poll moves what p's ring holds to the handler; a corrupt ring drops p.
func (t *Transport) poll(p *peer) bool {
	n, err := p.in.poll(t.handler)
	if err != nil {
		p.in.r.c.consState.Store(endBroken)
		t.report(p, transport.Lost(p.rank, addr, err))
		return true
	}
	return n > 0
}

// check reports the peers that are gone: closed, broken, given up or, with
// liveness, dead. Everything they completed before is delivered first. It
// also unlinks the segment's file once every peer has mapped it.
func (t *Transport) check(liveness bool) {
	for _, p := range t.order {
		if p.gone {
			continue
		}
		if err := t.lossOf(p, liveness); err != nil {
			t.poll(p) // all the peer published is there: deliver the complete messages
			if !p.gone {
				t.report(p, err)
			}
		}
	}
	if !t.unlinked && int(t.seg.hdr.attached.Load()) == len(t.order) {
		t.unlinked = true
		if err := t.seg.unlink(); err != nil {
			t.logf("rank %d: removing %s: %v", t.rank, t.seg.path, err)
		}
	}
}

// lossOf says why p is gone, or nil.
func (t *Transport) lossOf(p *peer, liveness bool) error {
	if err := p.failed(); err != nil {
		return err
	}
	switch p.in.r.c.prodState.Load() {
	case endClosed:
		return transport.Lost(p.rank, addr, errPeerClosed)
	case endBroken:
		return transport.Lost(p.rank, addr, errPeerBroke)
	case endNone:
		if s := p.seg.Load(); s != nil && s.hdr.state.Load() == stateClose {
			return transport.Lost(p.rank, addr, errPeerClosed)
		}
	}
	if liveness && !p.alive() {
		return transport.Lost(p.rank, addr, errPeerDied)
	}
	return nil
}

// report tells the handler, once, that p is lost; while this transport
// closes, that it is closed (ErrClosed alone): the peers may see our close
// and react before we are done, and a peer so seen was not lost.
func (t *Transport) report(p *peer, err error) {
	if t.closing.Load() {
		err = p.closedErr
	}
	err = p.setFault(err)
	p.gone = true
	p.failOffers(err)
	t.logf("rank %d: lost %v", t.rank, err)
	t.handler.Lost(p.rank, err)
}
