package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// ctl is the control block of one ring, in shared memory. The producer's
// and the consumer's fields sit on separate cache lines so that the two
// sides do not invalidate each other's line on every update.
type ctl struct {
	tail      atomic.Uint64 // bytes published by the producer, ever
	prodState atomic.Uint32 // endNone, endOpen, endClosed or endBroken
	prodPid   atomic.Uint32 // the producer's process id, once attached
	spaceWait atomic.Uint32 // 1 while the producer may sleep on spaceSeq
	claim     atomic.Uint32 // claimFree, claimCopying or claimWithdrawn; see singlecopy.go
	_         [40]byte

	head      atomic.Uint64 // bytes consumed, ever
	consState atomic.Uint32 // endOpen, endClosed or endBroken
	spaceSeq  atomic.Uint32 // futex word: bumped when space is freed for a sleeping producer
	noCopy    atomic.Uint32 // 1 once the consumer found it cannot read the producer's memory
	copyOK    atomic.Uint32 // 1 once the consumer has read the producer's memory
	_         [40]byte
}

// ctlSize is the size of a ctl in the segment layout.
const ctlSize = 128

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
	r       ring
	tail    uint64 // the last tail published
	hdr     [frameHeaderSize]byte
	desc    [descSize]byte // a single-copy frame's descriptor
	payload []byte
	off     int // bytes of the current frame written
	total   int // bytes in the current frame
}

// begin starts a frame for h and payload; step then moves it.
func (p *producer) begin(h transport.Header, payload []byte) {
	putHeader(p.hdr[:], h, 0)
	p.payload = payload
	p.off = 0
	p.total = frameHeaderSize + len(payload)
}

// beginSingle starts a single-copy frame for h and payload: the header and
// the payload's address. It returns the position the frame ends at.
func (p *producer) beginSingle(h transport.Header, payload []byte) uint64 {
	binary.LittleEndian.PutUint64(p.desc[:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(payload)))))
	putHeader(p.hdr[:], h, flagSingleCopy)
	p.payload = p.desc[:]
	p.off = 0
	p.total = frameHeaderSize + descSize
	return p.tail + uint64(p.total)
}

// step writes as much of the current frame as the ring has room for and
// publishes it. It reports whether it wrote anything and whether the
// frame is complete. A frame smaller than a quarter of the ring is written
// in one piece; a larger one streams in pieces of at least a quarter, so
// that the two sides do not trade tiny pieces.
func (p *producer) step() (wrote, done bool, err error) {
	used, err := p.r.used(p.tail, p.r.c.head.Load())
	if err != nil {
		return false, false, err
	}
	free := p.r.size() - used
	rem := uint64(p.total - p.off)
	if free < min(rem, p.r.size()/4) {
		return false, false, nil
	}
	n := int(min(free, rem))
	pos, off := p.tail, p.off
	if off < frameHeaderSize {
		k := min(frameHeaderSize-off, n)
		p.r.write(pos, p.hdr[off:off+k])
		pos, off = pos+uint64(k), off+k
	}
	if end := p.off + n; off < end {
		p.r.write(pos, p.payload[off-frameHeaderSize:end-frameHeaderSize])
	}
	p.off += n
	p.tail += uint64(n)
	p.r.c.tail.Store(p.tail)
	if p.off == p.total {
		p.payload = nil // do not keep the caller's buffer alive
		return true, true, nil
	}
	return true, false, nil
}

// busy reports whether a frame is half-written.
func (p *producer) busy() bool { return p.off > 0 && p.off < p.total }

// room reports whether step would write now.
func (p *producer) room() bool {
	used := p.tail - p.r.c.head.Load()
	rem := uint64(p.total - p.off)
	return used > p.r.size() || p.r.size()-used >= min(rem, p.r.size()/4)
}
