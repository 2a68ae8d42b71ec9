package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

// DefaultSingleCopy is the smallest payload sent by single copy: the
// sender puts only a descriptor (the payload's address) in the ring, the
// receiver copies the payload straight from the sender's memory into the
// posted buffer with process_vm_readv (Linux's cross-memory attach, as Open
// MPI's vader uses it), and the send completes once the receiver has taken
// it. Each byte then crosses memory once instead of twice, the receivers
// of one sender copy in parallel, and a receiver copies even while its
// sender is descheduled.
//
// The kernel's copy is not free: on the 2-core VM this was measured on it
// moved cold 16 MiB at 3.5 GB/s against memmove's 7 GB/s, and pinning the
// pages costs too. While a message that came before its receive was taken
// into an inbox and copied again, single copy lost where every rank sends
// and receives alike (ring all-reduce of 256 KiB segments at np 2: 0.75x
// the bus bandwidth of streaming), and the threshold stood above prims'
// ring segments. Since started sends wait in the receiver for their
// receive (see pull), the segments gain too: collbench, 1-64 MiB, two
// alternating sweeps, busbw against a 512 KiB threshold: all-reduce np 2
// 1.0-2.5x (one 64 MiB run 0.85x), np 4 0.65-1.3x (1.05-1.3x from 4 MiB),
// np 8 0.95-1.45x; broadcast np 4 0.9-2.3x; all-gather np 4 1.05-1.9x.
// 64 and 128 KiB measured within noise of 256 KiB. BenchmarkStream
// measures the transport alone.
const DefaultSingleCopy = 256 << 10

// WithSingleCopy sets the smallest payload sent by single copy; n <= 0
// turns single copy off, so that every byte streams through the rings.
func WithSingleCopy(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = 0
		}
		c.singleCopy = n
	}
}

// WithHugePages says whether memory that single-copy sends offer again
// and again is collapsed into transparent huge pages, which the receivers
// copy from faster (see hugepager). On by default.
func WithHugePages(on bool) Option {
	return func(c *config) { c.hugePages = on }
}

// processVMReadv is unix.ProcessVMReadv; tests replace it to play a
// kernel that refuses cross-memory reads.
var processVMReadv = unix.ProcessVMReadv

// Copier states: a consumer tries process_vm_readv on the producer once,
// with the first descriptor it gets, and then keeps to the answer.
const (
	copyUnknown = iota
	copyOK
	copyRefused
)

// copier reads single-copy payloads out of one producer's memory. The
// consumer owns one, and each taken offer has its own.
type copier struct {
	state  int
	pid    int
	local  [1]unix.Iovec
	remote [1]unix.RemoteIovec
	probe  [1]byte
}

// offerSlots is how many single-copy offers a producer may have out to
// one consumer at a time. Offers are taken in the order their receives are
// posted, not in ring order, so each has a state word of its own in the
// ring's ctl, and the ring moves on past its descriptor at once.
const offerSlots = 32

// States of an offer's slot. The producer moves a slot from slotFree to
// slotOffered before it publishes the descriptor, and back to slotFree
// once it has seen slotTaken. The taker moves it from slotOffered to
// slotCopying, copies, and moves it to slotTaken; a consumer that drops
// the message (Release: its communicator was freed) moves it to slotTaken
// without copying. A producer whose Send is cancelled before its payload
// was taken moves it from slotOffered to slotWithdrawn and forgets it; the
// consumer, which has passed the descriptor and may have promised the
// message to a receive, fails that receive (transport.ErrWithdrawn) and
// moves the slot back to slotFree. The link stays up: the ring's frames
// are whole. (A producer that closes withdraws its offers too; a consumer
// then finds the ring closed, and the peer lost.)
const (
	slotFree = iota
	slotOffered
	slotCopying
	slotTaken
	slotWithdrawn
)

// pull handles the single-copy frame whose header the consumer has read.
// It consumes the descriptor at once. A started send's offer (descKeep)
// goes to the handler, which takes it when a receive matches it; any
// other is taken now, into the slice Buffer returns, and delivered, as is
// every offer to a handler that is no transport.Offerer.
// If this process may not read the producer's memory (a ptrace policy
// such as Yama's), it marks the ring noCopy and passes the frame without
// delivering it; the producer then streams the same message through the
// ring (only its first single-copy send can meet this, and that one waits
// for the answer).
func (c *consumer) pull(h transport.Handler, hdr transport.Header) error {
	c.r.read(c.head+frameHeaderSize, c.hb[frameHeaderSize:])
	addr := binary.LittleEndian.Uint64(c.hb[frameHeaderSize:])
	slot := binary.LittleEndian.Uint32(c.hb[frameHeaderSize+8:])
	flags := binary.LittleEndian.Uint32(c.hb[frameHeaderSize+12:])
	end := c.head + uint64(frameSize(descSize))
	if slot >= offerSlots || flags&^descKeep != 0 {
		return fmt.Errorf("%w: single-copy slot %d of %d, flags %#x", errCorrupt, slot, offerSlots, flags)
	}
	if c.copier == nil {
		c.copier = &copier{}
	}
	cp := c.copier
	if cp.state == copyUnknown {
		cp.pid = int(c.r.c.prodPid.Load())
		if cp.state = cp.try(addr); cp.state == copyOK {
			c.r.c.copyOK.Store(1)
		}
	}
	if cp.state == copyRefused {
		c.r.c.noCopy.Store(1)
		if !c.r.c.slots[slot].CompareAndSwap(slotOffered, slotTaken) {
			return fmt.Errorf("%w: it withdrew a single-copy send", errPeerBroke)
		}
		c.publish(end)
		c.wakeTaken()
		return nil
	}
	c.publish(end)
	o := newOffer(c, cp.pid, addr, hdr.Len, slot)
	if oh, ok := h.(transport.Offerer); ok && flags&descKeep != 0 {
		oh.Offer(c.peer, hdr, o)
		return nil
	}
	// Taken now: claimed before the handler is asked for a buffer, so that
	// a send withdrawn first is dropped unseen, as though never sent,
	// and one not withdrawn by then cannot be.
	defer o.free()
	st := &c.r.c.slots[slot]
	if !st.CompareAndSwap(slotOffered, slotCopying) {
		if c.r.c.prodState.Load() == endOpen && st.CompareAndSwap(slotWithdrawn, slotFree) {
			return nil
		}
		return fmt.Errorf("%w: it withdrew a single-copy send", errPeerBroke)
	}
	buf := h.Buffer(c.peer, hdr)
	if len(buf) != hdr.Len {
		st.Store(slotTaken)
		c.wakeTaken()
		return fmt.Errorf("the handler gave a %d-byte buffer for a %d-byte message", len(buf), hdr.Len)
	}
	if err := o.copyOut(buf); err != nil {
		return err
	}
	h.Deliver(c.peer, hdr, buf)
	return nil
}

// wakeTaken tells the producer that an offer was taken: a Send waiting on
// the ring's space word, and the producer's own polls, which complete
// started sends.
func (c *consumer) wakeTaken() {
	if c.freed != nil {
		c.freed()
	}
	if c.taken != nil {
		c.taken()
	}
}

// try reads one byte at addr to learn whether this process may read the
// producer's memory.
func (cp *copier) try(addr uint64) int {
	if cp.pid <= 0 {
		return copyRefused
	}
	err := cp.read(cp.probe[:], addr)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS) {
		return copyRefused
	}
	return copyOK // any other failure shows again on the real read
}

// read copies len(dst) bytes at addr in the producer's memory into dst.
// The kernel may copy less than asked in one call; read goes on until all
// is there.
func (cp *copier) read(dst []byte, addr uint64) error {
	for done := 0; done < len(dst); {
		cp.local[0].Base = &dst[done]
		cp.local[0].SetLen(len(dst) - done)
		cp.remote[0] = unix.RemoteIovec{Base: uintptr(addr) + uintptr(done), Len: len(dst) - done}
		n, err := processVMReadv(cp.pid, cp.local[:], cp.remote[:], 0)
		if err != nil {
			return fmt.Errorf("reading a %d-byte single-copy payload from process %d: %w", len(dst), cp.pid, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: process %d gave 0 of %d single-copy bytes", errCorrupt, cp.pid, len(dst)-done)
		}
		done += n
	}
	cp.local[0].Base = nil // do not keep dst alive
	return nil
}

// sendSingle sends payload by single copy: a descriptor frame, then a wait
// until the payload has been taken. It reports false, with a nil error,
// when the consumer turned out unable to read our memory, or every offer
// slot is in use; the caller then streams the message. The wait takes a
// matching receive on the peer (the consumer keeps the offer until one is
// posted). Cancelling ctx withdraws the send unless its payload is being
// copied; the link stays up: the consumer drops the message unseen, or
// fails the receive it had promised it to (ErrWithdrawn).
//
// The payload reached Send through an interface, so it lives in the heap,
// which Go never moves; the address stays valid while we hold payload.
func (p *peer) sendSingle(ctx context.Context, h transport.Header, payload []byte) (bool, error) {
	o := &p.out
	slot, ok := p.claimSlot()
	if !ok {
		return false, nil
	}
	p.t.huge.note(payload)
	o.beginSingle(h, payload, slot, false)
	if err := p.write(ctx); err != nil {
		o.r.c.slots[slot].Store(slotFree)
		return false, err // a frame this small is written whole or not at all
	}
	defer runtime.KeepAlive(payload)
	st := &o.r.c.slots[slot]
	spins, cancellable := 0, true
	for st.Load() != slotTaken {
		err := p.waitFor(ctx, &spins, int(slot), cancellable)
		if err == nil {
			continue
		}
		if cancellable && ctx.Err() != nil && !errors.Is(err, transport.ErrPeerLost) {
			if st.CompareAndSwap(slotOffered, slotWithdrawn) {
				p.out.payload = nil
				return false, fmt.Errorf("single-copy send withdrawn: %w", err)
			}
			cancellable = false // the consumer is copying
			continue
		}
		return false, err
	}
	st.Store(slotFree)
	return o.r.c.noCopy.Load() == 0, nil
}

// claimSlot takes a free offer slot for a descriptor about to be written.
// p.sendMu is held: slots leave slotFree only here.
func (p *peer) claimSlot() (uint32, bool) {
	slots := &p.out.r.c.slots
	for i := range uint32(offerSlots) {
		s := (p.nextSlot + i) % offerSlots
		if slots[s].Load() == slotFree {
			slots[s].Store(slotOffered)
			p.nextSlot = s + 1
			return s, true
		}
	}
	return 0, false
}

// SingleCopy implements transport.Puller: the single-copy size, for a
// peer of this host whose consumer has not found our memory closed to it.
func (t *Transport) SingleCopy(peer int) int {
	p, err := t.peer(peer)
	if err != nil || t.cfg.singleCopy == 0 {
		return 0
	}
	if p.seg.Load() != nil && p.out.r.c.noCopy.Load() != 0 {
		return 0
	}
	return t.cfg.singleCopy
}

// startedSend is a started single-copy send (StartSend) whose payload the
// consumer has not taken yet.
type startedSend struct {
	slot    uint32
	payload []byte // kept alive, and unchanged by the caller, until taken
	done    transport.Done
}

// StartSend implements transport.Starter: a payload of at least the
// single-copy size, to a peer whose consumer has already read our memory,
// is offered by a descriptor in the ring at once, and done is called when
// the payload has been taken (or the peer is lost). Sends to the peer after
// it may go out at once, and their payloads may be taken before this one
// (by receives of other tags). Anything else is left to Send.
func (t *Transport) StartSend(peer int, h transport.Header, payload []byte, done transport.Done) (bool, error) {
	p, err := t.peer(peer)
	if err != nil || h.Len != len(payload) || t.cfg.singleCopy == 0 || len(payload) < t.cfg.singleCopy ||
		t.closing.Load() || !t.started.Load() || p.seg.Load() == nil {
		return false, nil
	}
	if !p.sendMu.TryLock() {
		return false, nil
	}
	defer p.sendMu.Unlock()
	o := &p.out
	c := o.r.c
	if p.sendClosed || p.sendable() != nil || o.busy() || c.copyOK.Load() == 0 || c.noCopy.Load() != 0 {
		return false, nil
	}
	if !o.fits(frameSize(descSize)) {
		return false, nil
	}
	slot, ok := p.claimSlot()
	if !ok {
		return false, nil
	}
	t.huge.note(payload)
	// The send is listed before the frame is published, so that whoever
	// reaps after the consumer's bell finds it.
	p.offerMu.Lock()
	o.beginSingle(h, payload, slot, true)
	p.offers = append(p.offers, startedSend{slot: slot, payload: payload, done: done})
	t.offering.Add(1)
	_, whole, err := o.step()
	if err != nil || !whole {
		p.offers[len(p.offers)-1] = startedSend{} // the caller completes it
		p.offers = p.offers[:len(p.offers)-1]
		t.offering.Add(-1)
		p.offerMu.Unlock()
		if err == nil {
			err = errors.New("a descriptor that fitted was not written whole")
		}
		return true, p.breakOut(err)
	}
	p.offerMu.Unlock()
	p.seg.Load().ringBell()
	return true, nil
}

// Withdraw implements transport.Withdrawer: a started send whose payload
// nobody has begun to copy is withdrawn, and done is told so. The peer's
// consumer has passed its descriptor, and may have promised the message
// to a receive, which fails (ErrWithdrawn); the link stays up.
func (t *Transport) Withdraw(peer int, done transport.Done, cause error) bool {
	p, err := t.peer(peer)
	if err != nil || p.seg.Load() == nil {
		return false
	}
	p.offerMu.Lock()
	i := slices.IndexFunc(p.offers, func(o startedSend) bool { return o.done == done })
	if i < 0 || !p.out.r.c.slots[p.offers[i].slot].CompareAndSwap(slotOffered, slotWithdrawn) {
		p.offerMu.Unlock()
		return false
	}
	p.offers = slices.Delete(p.offers, i, i+1)
	t.offering.Add(-1)
	p.offerMu.Unlock()
	done.SendDone(fmt.Errorf("single-copy send withdrawn: %w", cause))
	return true
}

// reap completes the started sends whose payload the consumers have taken,
// and reports whether it completed any.
func (t *Transport) reap() bool {
	if t.offering.Load() == 0 {
		return false
	}
	reaped := false
	for _, p := range t.order {
		p.offerMu.Lock()
		if len(p.offers) > 0 {
			slots := &p.out.r.c.slots
			kept := p.offers[:0]
			for _, o := range p.offers {
				if slots[o.slot].Load() != slotTaken {
					kept = append(kept, o)
					continue
				}
				slots[o.slot].Store(slotFree)
				t.offering.Add(-1) // before the sender hears of it
				o.done.SendDone(nil)
				reaped = true
			}
			clear(p.offers[len(kept):])
			p.offers = kept
		}
		p.offerMu.Unlock()
	}
	return reaped
}

// failOffers completes p's started sends: those taken with success, the
// rest with err, withdrawn first, so that the consumer, which may keep an
// offer for long, cannot copy a payload its sender has been given back. A
// payload being copied is waited for, while the peer lives.
func (p *peer) failOffers(err error) {
	p.offerMu.Lock()
	defer p.offerMu.Unlock()
	for i, o := range p.offers {
		p.t.offering.Add(-1) // before the sender hears of it
		if p.seg.Load() == nil || p.withdraw(o.slot) {
			o.done.SendDone(err)
		} else {
			o.done.SendDone(nil)
		}
		p.offers[i] = startedSend{}
	}
	p.offers = p.offers[:0]
}

// withdraw withdraws the offer in slot unless it was taken, and reports
// whether it did; an offer being copied is waited for while the peer's
// process lives.
func (p *peer) withdraw(slot uint32) bool {
	st := &p.out.r.c.slots[slot]
	for {
		switch st.Load() {
		case slotTaken:
			st.Store(slotFree)
			return false
		case slotCopying:
			if !p.alive() {
				return true
			}
			time.Sleep(50 * time.Microsecond)
		case slotFree, slotWithdrawn:
			return true
		default:
			if st.CompareAndSwap(slotOffered, slotWithdrawn) {
				return true
			}
		}
	}
}
