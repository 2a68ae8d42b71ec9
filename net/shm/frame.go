package shm

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// MaxPayload is the largest payload a frame may announce (64 GiB, or the
// largest int where an int is 32 bits). A peer that announces more is
// dropped as corrupt rather than trusted.
const MaxPayload = min(1<<36, math.MaxInt)

// frameHeaderSize is the length of a frame header in a ring:
//
//	[0:4]   magic "gsM" and version 2
//	[4:8]   flags: flagSingleCopy, flagWhole
//	[8:12]  comm, uint32
//	[12:16] tag, int32
//	[16:24] payload length, uint64
//
// All fields are little-endian. The payload follows at once; the frame is
// padded to a multiple of 8 bytes, so frames start on 8-byte boundaries. A
// single-copy frame carries, instead of the payload, a 16-byte descriptor:
// the payload's address in the sender's memory, which the receiver reads
// with process_vm_readv, and the slot of the offer (see singlecopy.go).
//
// The first 8 bytes, magic and flags, are the frame's marker word, which
// the producer stores last: the consumer learns that a frame has arrived
// by finding a marker at its head, not from the ring's tail, so a message
// crosses between cores in the cache lines that carry it. After each frame
// the producer zeroes the word where the next frame will start before it
// publishes, so a stale byte of an earlier lap is never taken for a marker.
// A frame marked whole was written in one piece before its marker; the
// pieces of a larger one are published by the ring's tail.
const frameHeaderSize = 24

// markerSize is the length of the marker word, and of the terminator.
const markerSize = 8

// Frame flags.
const (
	flagSingleCopy = 1 // the payload stays in the sender's memory
	flagWhole      = 2 // the whole frame was there when its marker was stored
)

// descSize is the length of a single-copy frame's descriptor: the
// payload's address (uint64), the offer's slot (uint32) and its flags
// (uint32: descKeep).
const descSize = 16

// descKeep says that the consumer may keep the offer until a receive
// matches it: the send was started (StartSend), and nothing waits for it.
// A blocking Send's offer is taken at once, into an inbox if need be, so
// that a Send completes whether or not its receive is posted yet, as over
// TCP, and the sends queued behind it go on.
const descKeep = 1

// frameMagic is "gsM\x02" read as a little-endian uint32.
const frameMagic = uint32('g') | uint32('s')<<8 | uint32('M')<<16 | uint32(2)<<24

// frameSize returns the length of a frame with n payload bytes, padding
// included.
func frameSize(n int) int { return (frameHeaderSize + n + 7) &^ 7 }

// marker returns the marker word of a frame with flags.
func marker(flags uint32) uint64 { return uint64(frameMagic) | uint64(flags)<<32 }

func putHeader(b []byte, h transport.Header, flags uint32) {
	_ = b[frameHeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:4], frameMagic)
	binary.LittleEndian.PutUint32(b[4:8], flags)
	binary.LittleEndian.PutUint32(b[8:12], h.Comm)
	binary.LittleEndian.PutUint32(b[12:16], uint32(h.Tag))
	binary.LittleEndian.PutUint64(b[16:24], uint64(h.Len))
}

// parseHeader decodes and checks one header and returns it with its
// flags; it never trusts a length beyond MaxPayload.
func parseHeader(b []byte) (transport.Header, uint32, error) {
	if m := binary.LittleEndian.Uint32(b[0:4]); m != frameMagic {
		return transport.Header{}, 0, fmt.Errorf("%w: frame magic %#08x, want %#08x", errCorrupt, m, frameMagic)
	}
	flags := binary.LittleEndian.Uint32(b[4:8])
	if flags&^(flagSingleCopy|flagWhole) != 0 {
		return transport.Header{}, 0, fmt.Errorf("%w: unknown frame flags %#x", errCorrupt, flags)
	}
	n := binary.LittleEndian.Uint64(b[16:24])
	if n > MaxPayload {
		return transport.Header{}, 0, fmt.Errorf("%w: frame announces %d bytes, above the %d-byte limit", errCorrupt, n, MaxPayload)
	}
	return transport.Header{
		Comm: binary.LittleEndian.Uint32(b[8:12]),
		Tag:  int32(binary.LittleEndian.Uint32(b[12:16])),
		Len:  int(n),
	}, flags, nil
}

// consumer reads framed messages out of a ring into the slices a Handler
// provides. It is owned by the receiving goroutine.
type consumer struct {
	r    ring
	peer int
	t    *Transport // nil in tests of the framing alone
	head uint64     // the last head published
	// freed, if set, is called after every head update, to wake a
	// producer that waits for space.
	freed func()

	hb   [frameHeaderSize + descSize]byte
	h    transport.Header
	buf  []byte // the current message's destination; nil between messages
	got  int    // bytes of buf filled
	end  uint64 // where the current frame ends, padding included
	open bool   // a message is half-read: Buffer was called, Deliver was not
	// whole says the current frame was published in one piece: its bytes
	// are all there, and the tail need not be read.
	whole bool

	// arriver, if set, takes small messages written whole in one call
	// (transport.Arriver), in place of Buffer and Deliver.
	arriver transport.Arriver

	// copier pulls single-copy payloads out of the producer's memory,
	// once it has met one (see singlecopy.go); taken, if set, is called
	// after each such payload is taken, to tell the producer.
	copier *copier
	taken  func()
}

// poll moves everything the ring holds to h: headers become Buffer calls,
// payload bytes are copied straight into the returned slices, and complete
// messages are delivered. It returns how many bytes it consumed. An error
// means the ring is corrupt and the peer must be dropped.
func (c *consumer) poll(h transport.Handler) (int, error) {
	start := c.head
	chunk := c.r.size() / 4
	for {
		if !c.open {
			if c.head&(markerSize-1) != 0 {
				return 0, fmt.Errorf("%w: head %d is not at a frame boundary", errCorrupt, c.head)
			}
			m := c.r.loadMarker(c.head)
			if m == 0 {
				break
			}
			handled, err := c.begin(h, m)
			if err != nil {
				return 0, err
			}
			if handled {
				continue
			}
		}
		if c.got < len(c.buf) {
			limit := c.end
			if !c.whole {
				tail := c.r.c.tail.Load()
				if _, err := c.r.used(tail, c.head); err != nil {
					return 0, err
				}
				limit = min(tail, c.end)
			}
			n := min(limit-c.head, uint64(len(c.buf)-c.got), chunk)
			if n == 0 {
				break
			}
			c.r.read(c.head, c.buf[c.got:c.got+int(n)])
			c.got += int(n)
			if c.got < len(c.buf) {
				c.publish(c.head + n)
				continue
			}
		}
		buf := c.buf
		c.buf, c.open = nil, false
		c.publish(c.end)
		h.Deliver(c.peer, c.h, buf)
	}
	return int(c.head - start), nil
}

// arriveMax is the largest message a consumer hands to an Arriver: it is
// copied while the engine holds its lock when it comes early.
const arriveMax = 4 << 10

// begin reads the header of the frame whose marker word m is at the head,
// and asks h where its payload goes. A single-copy frame, and a small one
// written whole where the consumer has an arriver, are handled whole, and
// reported.
func (c *consumer) begin(h transport.Handler, m uint64) (handled bool, err error) {
	binary.LittleEndian.PutUint64(c.hb[:markerSize], m)
	c.r.read(c.head+markerSize, c.hb[markerSize:frameHeaderSize])
	hdr, flags, err := parseHeader(c.hb[:frameHeaderSize])
	if err != nil {
		return false, err
	}
	size := uint64(frameSize(hdr.Len))
	if flags&flagSingleCopy != 0 {
		size = uint64(frameSize(descSize))
	}
	whole := flags&flagWhole != 0
	if whole && size+markerSize > c.r.size() {
		return false, fmt.Errorf("%w: a %d-byte frame marked whole in a %d-byte ring", errCorrupt, size, c.r.size())
	}
	if flags&flagSingleCopy != 0 {
		if !whole || hdr.Len == 0 {
			return false, fmt.Errorf("%w: a single-copy frame not written whole", errCorrupt)
		}
		return true, c.pull(h, hdr)
	}
	if whole && c.arriver != nil && hdr.Len <= arriveMax {
		i := (c.head + frameHeaderSize) & c.r.mask
		a := c.r.data[i:min(i+uint64(hdr.Len), c.r.size())]
		c.arriver.Arrive(c.peer, hdr, a, c.r.data[:hdr.Len-len(a)])
		c.publish(c.head + size)
		return true, nil
	}
	c.end = c.head + size
	c.head += frameHeaderSize // published with the first payload bytes
	buf := h.Buffer(c.peer, hdr)
	if len(buf) != hdr.Len {
		return false, fmt.Errorf("the handler gave a %d-byte buffer for a %d-byte message", len(buf), hdr.Len)
	}
	c.h, c.buf, c.got, c.open, c.whole = hdr, buf, 0, true, whole
	return false, nil
}
func (c *consumer) publish(head uint64) {
	c.head = head
	c.r.c.head.Store(head)
	if c.freed != nil {
		c.freed()
	}
}
