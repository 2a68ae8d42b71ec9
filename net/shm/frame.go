package shm

import (
	"encoding/binary"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// MaxPayload is the largest payload a frame may announce (64 GiB). A peer
// that announces more is dropped as corrupt rather than trusted.
const MaxPayload = 1 << 36

// frameHeaderSize is the length of a frame header in a ring:
//
//	[0:4]   magic "gsM" and version 1
//	[4:8]   comm, uint32
//	[8:12]  tag, int32
//	[12:16] flags: 0, or flagSingleCopy
//	[16:24] payload length, uint64
//
// All fields are little-endian. The payload follows at once, without
// padding; a header may wrap around the end of the ring like any byte.
// A single-copy frame carries, instead of the payload, an 8-byte
// descriptor: the payload's address in the sender's memory, which the
// receiver reads with process_vm_readv (see singlecopy.go).
const frameHeaderSize = 24

// flagSingleCopy marks a frame whose payload stays in the sender's memory.
const flagSingleCopy = 1

// descSize is the length of a single-copy frame's descriptor.
const descSize = 8

// frameMagic is "gsM\x01" read as a little-endian uint32.
const frameMagic = uint32('g') | uint32('s')<<8 | uint32('M')<<16 | uint32(1)<<24

func putHeader(b []byte, h transport.Header, flags uint32) {
	_ = b[frameHeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:4], frameMagic)
	binary.LittleEndian.PutUint32(b[4:8], h.Comm)
	binary.LittleEndian.PutUint32(b[8:12], uint32(h.Tag))
	binary.LittleEndian.PutUint32(b[12:16], flags)
	binary.LittleEndian.PutUint64(b[16:24], uint64(h.Len))
}

// parseHeader decodes and checks one header and returns it with its
// flags; it never trusts a length beyond MaxPayload.
func parseHeader(b []byte) (transport.Header, uint32, error) {
	if m := binary.LittleEndian.Uint32(b[0:4]); m != frameMagic {
		return transport.Header{}, 0, fmt.Errorf("%w: frame magic %#08x, want %#08x", errCorrupt, m, frameMagic)
	}
	flags := binary.LittleEndian.Uint32(b[12:16])
	if flags&^flagSingleCopy != 0 {
		return transport.Header{}, 0, fmt.Errorf("%w: unknown frame flags %#x", errCorrupt, flags)
	}
	n := binary.LittleEndian.Uint64(b[16:24])
	if n > MaxPayload {
		return transport.Header{}, 0, fmt.Errorf("%w: frame announces %d bytes, above the %d-byte limit", errCorrupt, n, MaxPayload)
	}
	return transport.Header{
		Comm: binary.LittleEndian.Uint32(b[4:8]),
		Tag:  int32(binary.LittleEndian.Uint32(b[8:12])),
		Len:  int(n),
	}, flags, nil
}

// consumer reads framed messages out of a ring into the slices a Handler
// provides. It is owned by the receiving goroutine.
type consumer struct {
	r    ring
	peer int
	head uint64 // the last head published
	// freed, if set, is called after every head update, to wake a
	// producer that waits for space.
	freed func()

	hb   [frameHeaderSize + descSize]byte
	h    transport.Header
	buf  []byte // the current message's destination; nil between messages
	got  int    // bytes of buf filled
	open bool   // a message is half-read: Buffer was called, Deliver was not

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
	avail, err := c.r.used(c.r.c.tail.Load(), c.head)
	if err != nil {
		return 0, err
	}
	start := c.head
	chunk := c.r.size() / 4
	for avail > 0 {
		if !c.open {
			if avail < frameHeaderSize {
				break
			}
			single, err := c.begin(h, avail)
			if err != nil {
				return 0, err
			}
			if single {
				avail -= frameHeaderSize + descSize
				continue
			}
			if !c.open { // a single-copy frame whose descriptor is not all there
				break
			}
			avail -= frameHeaderSize
		}
		n := min(avail, uint64(len(c.buf)-c.got), chunk)
		c.r.read(c.head, c.buf[c.got:c.got+int(n)])
		c.got += int(n)
		avail -= n
		c.publish(c.head + n)
		if c.got == len(c.buf) {
			buf := c.buf
			c.buf, c.open = nil, false
			h.Deliver(c.peer, c.h, buf)
		}
	}
	return int(c.head - start), nil
}

// begin reads the next header, of a frame with avail bytes published, and
// asks h where its payload goes. A single-copy frame is handled whole, and
// reported, when its descriptor is there too; otherwise it is left in the
// ring (single and c.open both false).
func (c *consumer) begin(h transport.Handler, avail uint64) (single bool, err error) {
	c.r.read(c.head, c.hb[:frameHeaderSize])
	hdr, flags, err := parseHeader(c.hb[:frameHeaderSize])
	if err != nil {
		return false, err
	}
	if flags&flagSingleCopy != 0 {
		if avail < frameHeaderSize+descSize {
			return false, nil
		}
		return true, c.pull(h, hdr)
	}
	c.head += frameHeaderSize // published with the first payload bytes
	buf := h.Buffer(c.peer, hdr)
	if len(buf) != hdr.Len {
		return false, fmt.Errorf("the handler gave a %d-byte buffer for a %d-byte message", len(buf), hdr.Len)
	}
	c.h, c.buf, c.got, c.open = hdr, buf, 0, true
	return false, nil
}

func (c *consumer) publish(head uint64) {
	c.head = head
	c.r.c.head.Store(head)
	if c.freed != nil {
		c.freed()
	}
}
