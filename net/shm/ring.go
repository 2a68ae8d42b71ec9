package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd/release"
	"github.com/gorun-hpc/gorun/spmd/transport"
)

// ctl is the control block of one ring, in shared memory. Each side's
// counter has a cache line of its own, and the words that change rarely
// share a third: the producer stores tail after every message and the
// consumer head, and neither should pull the other's line across cores
// with it (the consumer reads tail only for frames that stream, the
// producer head only when it runs short of room).
type ctl struct {
	tail atomic.Uint64 // bytes published by the producer, ever
	_    [56]byte

	head     atomic.Uint64 // bytes consumed, ever
	spaceSeq atomic.Uint32 // futex word: bumped when space is freed for a sleeping producer
	_        [52]byte

	prodState atomic.Uint32 // endNone, endOpen, endClosed or endBroken
	prodPid   atomic.Uint32 // the producer's process id, once attached
	spaceWait atomic.Uint32 // 1 while the producer may sleep on spaceSeq
	consState atomic.Uint32 // endOpen, endClosed or endBroken
	noCopy    atomic.Uint32 // 1 once the consumer found it cannot read the producer's memory
	copyOK    atomic.Uint32 // 1 once the consumer has read the producer's memory
	_         [40]byte

	// slots are the states of the producer's single-copy offers, one
	// word each (slotFree ... slotWithdrawn; see singlecopy.go).
	slots [offerSlots]atomic.Uint32
}

// ctlSize is the size of a ctl in the segment layout.
const ctlSize = 320

var _ [ctlSize - unsafe.Sizeof(ctl{})]byte // ctl fits its slot

// States of one end of a ring.
const (
	endNone   = 0 // not attached yet
	endOpen   = 1
	endClosed = 2 // closed cleanly: everything published is complete
	endBroken = 3 // gave up half-way through a frame, or found the ring corrupt
)

// errCorrupt is wrapped by every error about impossible ring contents.
var errCorrupt = errors.New("corrupt shared-memory ring")

// ring is one single-producer single-consumer byte ring: a ctl and a data
// area whose length is a power of two. Positions are byte counts since the
// ring was created; position p lives at data[p & mask].
type ring struct {
	c    *ctl
	data []byte
	mask uint64
}

func newRing(c *ctl, data []byte) ring {
	return ring{c: c, data: data, mask: uint64(len(data) - 1)}
}

func (r ring) size() uint64 { return uint64(len(r.data)) }

// write copies src to the ring at position pos, wrapping at the end.
func (r ring) write(pos uint64, src []byte) {
	i := pos & r.mask
	n := copy(r.data[i:], src)
	copy(r.data, src[n:])
}

// storeMarker publishes the marker word of the frame that starts at pos;
// frames start on 8-byte boundaries, so the word never wraps.
func (r ring) storeMarker(pos, m uint64) {
	(*atomic.Uint64)(unsafe.Pointer(&r.data[pos&r.mask])).Store(m)
}

// loadMarker returns the marker word at pos: 0 while no frame starts there.
func (r ring) loadMarker(pos uint64) uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.data[pos&r.mask])).Load()
}

// zeroMarker clears the word at pos, where the next frame will start,
// with a release store: the marker store that publishes the frame before
// it follows, and orders it.
func (r ring) zeroMarker(pos uint64) {
	release.Store64((*atomic.Uint64)(unsafe.Pointer(&r.data[pos&r.mask])), 0)
}

// read copies the ring's bytes at position pos into dst, wrapping at the end.
func (r ring) read(pos uint64, dst []byte) {
	i := pos & r.mask
	n := copy(dst, r.data[i:])
	copy(dst[n:], r.data)
}

// used returns how many published bytes are not consumed yet, given the
// tail and head positions; more than the ring holds means corruption.
func (r ring) used(tail, head uint64) (uint64, error) {
	n := tail - head
	if n > r.size() {
		return 0, fmt.Errorf("%w: tail %d and head %d are %d bytes apart in a %d-byte ring",
			errCorrupt, tail, head, n, r.size())
	}
	return n, nil
}

// producer writes framed messages into a ring. It is owned by one sending
// goroutine at a time (the peer's sendMu).
type producer struct {
	r    ring
	tail uint64 // the last tail published
	// head is the consumer's head as last read. The producer reads the
	// shared word again only when this view leaves too little room: the
	// consumer stores it after every message, and a load per message
	// pulled its cache line across cores on every send.
	head    uint64
	hdr     [frameHeaderSize]byte
	desc    [descSize]byte // a single-copy frame's descriptor
	payload []byte
	flags   uint32
	off     int // bytes of the current frame written
	total   int // bytes in the current frame, padding included
}

// begin starts a frame for h and payload; step then moves it.
func (p *producer) begin(h transport.Header, payload []byte) {
	putHeader(p.hdr[:], h, 0)
	p.payload = payload
	p.flags = 0
	p.off = 0
	p.total = frameSize(len(payload))
}

// beginSingle starts a single-copy frame for h and payload: the header,
// the payload's address, the offer's slot and whether the consumer may
// keep the offer until a receive matches it. It returns the position the
// frame ends at.
func (p *producer) beginSingle(h transport.Header, payload []byte, slot uint32, keep bool) uint64 {
	binary.LittleEndian.PutUint64(p.desc[:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(payload)))))
	binary.LittleEndian.PutUint32(p.desc[8:], slot)
	var flags uint32
	if keep {
		flags = descKeep
	}
	binary.LittleEndian.PutUint32(p.desc[12:], flags)
	putHeader(p.hdr[:], h, flagSingleCopy)
	p.payload = p.desc[:]
	p.flags = flagSingleCopy
	p.off = 0
	p.total = frameSize(descSize)
	return p.tail + uint64(p.total)
}

// free returns the room the ring has, reading the consumer's head again
// only if the last view of it leaves less than want.
func (p *producer) free(want uint64) (uint64, error) {
	if used := p.tail - p.head; used <= p.r.size() && p.r.size()-used >= want {
		return p.r.size() - used, nil
	}
	p.head = p.r.c.head.Load()
	used, err := p.r.used(p.tail, p.head)
	if err != nil {
		return 0, err
	}
	return p.r.size() - used, nil
}

// fits reports whether a frame of n bytes, with the terminator after it,
// can be written whole now.
func (p *producer) fits(n int) bool {
	free, err := p.free(uint64(n) + markerSize)
	return err == nil && free >= uint64(n)+markerSize
}

// step writes as much of the current frame as the ring has room for and
// publishes it. It reports whether it wrote anything and whether the
// frame is complete. A frame that fits in a quarter of the ring is written
// in one piece, marked whole; a larger one streams in pieces of at least a
// quarter (the first holding the whole header), so that the two sides do
// not trade tiny pieces. The piece that ends a frame also zeroes the
// marker word after it, so that the consumer, looking there next, sees no
// frame until the next one is published.
func (p *producer) step() (wrote, done bool, err error) {
	rem := uint64(p.total - p.off)
	need := p.need(rem)
	free, err := p.free(need)
	if err != nil {
		return false, false, err
	}
	if free < need {
		return false, false, nil
	}
	n, last := rem, true
	if free < rem+markerSize { // the last piece keeps the last payload byte and the padding
		pad := uint64(p.total - frameHeaderSize - len(p.payload))
		n, last = min(free, rem-pad-1), false
	}
	first := p.off == 0
	if first && last {
		p.flags |= flagWhole
	}
	pos, off := p.tail, p.off
	if first { // all of the header but its marker word, published last
		p.r.write(pos+markerSize, p.hdr[markerSize:])
		pos, off = pos+frameHeaderSize, frameHeaderSize
	}
	if end := min(p.off+int(n), frameHeaderSize+len(p.payload)); off < end {
		p.r.write(pos, p.payload[off-frameHeaderSize:end-frameHeaderSize])
	}
	p.off += int(n)
	p.tail += n
	if last {
		p.r.zeroMarker(p.tail)
	}
	// The tail and the terminator are release stores; the marker's is
	// sequentially consistent, since ringBell then loads the words that
	// say whether the consumer polls or sleeps, which must not pass it.
	// Each sequentially consistent store (an XCHG on amd64) waits for the
	// stores before it, the frame's among them, whose line the consumer
	// was reading: a stream of 8-byte blocking sends at np 2 took 226-238
	// ns a message with three of them, 162-219 with one (5 runs each in
	// turns, the VM in its slow state); an 8-byte ping-pong hop, 209-213
	// ns against 191-195 in its fast state, with the engine's own (see
	// spmd's engine.sendOwn).
	release.Store64(&p.r.c.tail, p.tail)
	if first {
		p.r.storeMarker(p.tail-n, marker(p.flags))
	}
	if last {
		p.payload = nil // do not keep the caller's buffer alive
	}
	return true, last, nil
}

// need returns the room the next piece of a frame with rem bytes to go
// waits for: all of it and the terminator when that is at most a quarter of
// the ring, else a quarter (and the whole header, for the first piece).
func (p *producer) need(rem uint64) uint64 {
	piece := p.r.size() / 4
	if p.off == 0 {
		piece = max(piece, frameHeaderSize)
	}
	if rem+markerSize <= piece || rem <= piece {
		return rem + markerSize
	}
	return piece
}

// busy reports whether a frame is half-written.
func (p *producer) busy() bool { return p.off > 0 && p.off < p.total }

// room reports whether step would write now.
func (p *producer) room() bool {
	need := p.need(uint64(p.total - p.off))
	free, err := p.free(need)
	return err != nil || free >= need
}
