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
//	[12:16] zero, reserved
//	[16:24] payload length, uint64
//
// All fields are little-endian. The payload follows at once, without
// padding; a header may wrap around the end of the ring like any byte.
const frameHeaderSize = 24

// frameMagic is "gsM\x01" read as a little-endian uint32.
const frameMagic = uint32('g') | uint32('s')<<8 | uint32('M')<<16 | uint32(1)<<24

func putHeader(b []byte, h transport.Header) {
	_ = b[frameHeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:4], frameMagic)
	binary.LittleEndian.PutUint32(b[4:8], h.Comm)
	binary.LittleEndian.PutUint32(b[8:12], uint32(h.Tag))
	binary.LittleEndian.PutUint32(b[12:16], 0)
	binary.LittleEndian.PutUint64(b[16:24], uint64(h.Len))
}

// parseHeader decodes and checks one header; it never trusts a length
// beyond MaxPayload.
func parseHeader(b []byte) (transport.Header, error) {
	if m := binary.LittleEndian.Uint32(b[0:4]); m != frameMagic {
		return transport.Header{}, fmt.Errorf("%w: frame magic %#08x, want %#08x", errCorrupt, m, frameMagic)
	}
	if r := binary.LittleEndian.Uint32(b[12:16]); r != 0 {
		return transport.Header{}, fmt.Errorf("%w: reserved frame field is %#x", errCorrupt, r)
	}
	n := binary.LittleEndian.Uint64(b[16:24])
	if n > MaxPayload {
		return transport.Header{}, fmt.Errorf("%w: frame announces %d bytes, above the %d-byte limit", errCorrupt, n, MaxPayload)
	}
	return transport.Header{
		Comm: binary.LittleEndian.Uint32(b[4:8]),
		Tag:  int32(binary.LittleEndian.Uint32(b[8:12])),
		Len:  int(n),
	}, nil
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

	hb   [frameHeaderSize]byte
	h    transport.Header
	buf  []byte // the current message's destination; nil between messages
	got  int    // bytes of buf filled
	open bool   // a message is half-read: Buffer was called, Deliver was not
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
			if err := c.begin(h); err != nil {
				return 0, err
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

// begin reads the next header and asks h where its payload goes.
func (c *consumer) begin(h transport.Handler) error {
	c.r.read(c.head, c.hb[:])
	hdr, err := parseHeader(c.hb[:])
	if err != nil {
		return err
	}
	c.head += frameHeaderSize // published with the first payload bytes
	buf := h.Buffer(c.peer, hdr)
	if len(buf) != hdr.Len {
		return fmt.Errorf("the handler gave a %d-byte buffer for a %d-byte message", len(buf), hdr.Len)
	}
	c.h, c.buf, c.got, c.open = hdr, buf, 0, true
	return nil
}

func (c *consumer) publish(head uint64) {
	c.head = head
	c.r.c.head.Store(head)
	if c.freed != nil {
		c.freed()
	}
}
