package delayline

// maxPacket is the most bytes one read from a TUN device returns: an IPv4
// packet's length field has 16 bits.
const maxPacket = 1 << 16

// packetAlign rounds each packet's place in the ring, so that packets start
// on cache lines.
const packetAlign = 64

// slot is one packet in the ring: where its bytes are and when it is due.
type slot struct {
	pos int64 // byte position of its first byte, counted since the start
	n   int32 // its length
	at  int64 // when to deliver it, CLOCK_MONOTONIC ns
}

// ring is a first-in first-out queue of packets in one fixed buffer. The
// packets of a direction are delivered in the order they were read, so
// they leave the ring in the order they entered it and need no pool of
// buffers: each is read straight into the ring and written out from there.
// A ring belongs to one goroutine.
type ring struct {
	buf   []byte
	slots []slot

	wpos           int64  // next free byte position
	freed          int64  // byte position up to which packets have left
	pushed, popped uint64 // slots in and out
}

// newRing returns a ring of about size bytes that holds at least two
// packets of maxPacket bytes.
func newRing(size int) *ring {
	size = max(size, 4*maxPacket)
	size = (size + packetAlign - 1) &^ (packetAlign - 1)
	return &ring{buf: make([]byte, size), slots: make([]slot, max(1024, size/512))}
}

// reserve returns room for one packet of up to maxPacket bytes at the
// ring's tail, or nil when the ring is full. The packet joins the queue
// with push.
func (r *ring) reserve() []byte {
	size := int64(len(r.buf))
	pos := r.wpos
	if off := pos % size; size-off < maxPacket {
		pos += size - off // no room before the end: start over at the front
	}
	if pos+maxPacket-r.freed > size || r.pushed-r.popped >= uint64(len(r.slots)) {
		return nil
	}
	off := pos % size
	r.wpos = pos
	return r.buf[off : off+maxPacket]
}

// push queues the first n bytes of what reserve returned, due at at.
func (r *ring) push(n int, at int64) {
	r.slots[r.pushed%uint64(len(r.slots))] = slot{pos: r.wpos, n: int32(n), at: at}
	r.wpos += int64(n+packetAlign-1) &^ (packetAlign - 1)
	r.pushed++
}

// head returns the oldest packet and its due time, or ok false when the
// ring is empty. The bytes stay valid until pop.
func (r *ring) head() (p []byte, at int64, ok bool) {
	if r.popped == r.pushed {
		return nil, 0, false
	}
	s := r.slots[r.popped%uint64(len(r.slots))]
	off := s.pos % int64(len(r.buf))
	return r.buf[off : off+int64(s.n)], s.at, true
}

// pop removes the oldest packet.
func (r *ring) pop() {
	s := r.slots[r.popped%uint64(len(r.slots))]
	r.freed = s.pos + int64(s.n)
	r.popped++
}

// len returns how many packets wait.
func (r *ring) len() int { return int(r.pushed - r.popped) }
