package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// MaxPayload is the largest payload a frame may announce (64 GiB, or the
// largest int where an int is 32 bits). A peer that announces more is
// dropped as malformed rather than trusted.
const MaxPayload = min(1<<36, math.MaxInt)

// headerSize is the length of a frame header on the wire:
//
//	[0:4]   magic "grF" and version 1
//	[4:8]   comm, uint32
//	[8:12]  tag, int32
//	[12:20] payload length, uint64
//
// All fields are little-endian.
const headerSize = 20

// frameMagic is "grF\x01" read as a little-endian uint32: the three letters
// catch a stream that is not ours, the last byte is the frame version.
const frameMagic = uint32('g') | uint32('r')<<8 | uint32('F')<<16 | uint32(1)<<24

// readBufferSize is the size of each connection's read buffer.
const readBufferSize = 64 << 10

// errMalformed is wrapped by every header decoding error.
var errMalformed = errors.New("malformed frame header")

// putHeader encodes h into b, which must be headerSize bytes long.
func putHeader(b []byte, h transport.Header) {
	_ = b[headerSize-1]
	binary.LittleEndian.PutUint32(b[0:4], frameMagic)
	binary.LittleEndian.PutUint32(b[4:8], h.Comm)
	binary.LittleEndian.PutUint32(b[8:12], uint32(h.Tag))
	binary.LittleEndian.PutUint64(b[12:20], uint64(h.Len))
}

// parseHeader decodes and checks one header. It never trusts the length
// beyond MaxPayload.
func parseHeader(b []byte) (transport.Header, error) {
	if len(b) < headerSize {
		return transport.Header{}, fmt.Errorf("%w: %d bytes, want %d", errMalformed, len(b), headerSize)
	}
	if m := binary.LittleEndian.Uint32(b[0:4]); m != frameMagic {
		return transport.Header{}, fmt.Errorf("%w: magic %#08x, want %#08x", errMalformed, m, frameMagic)
	}
	n := binary.LittleEndian.Uint64(b[12:20])
	if n > MaxPayload {
		return transport.Header{}, fmt.Errorf("%w: payload of %d bytes exceeds the %d-byte limit", errMalformed, n, MaxPayload)
	}
	return transport.Header{
		Comm: binary.LittleEndian.Uint32(b[4:8]),
		Tag:  int32(binary.LittleEndian.Uint32(b[8:12])),
		Len:  int(n),
	}, nil
}

// errAgain is what a decoder's source returns when it has nothing to
// read now (EAGAIN on a non-blocking socket).
var errAgain = errors.New("nothing to read now")

// source is where a decoder reads: Read behaves as read(2) on a
// non-blocking socket. It returns n > 0 bytes, or 0 and nil at end of
// stream, or 0 and errAgain when nothing has arrived, or 0 and another
// error when the stream failed.
type source interface {
	Read(p []byte) (int, error)
}

// decoder parses the frames of one connection from whatever pieces its
// reads return and hands them to a Handler. It keeps the state of a frame
// that has arrived in part, so that successive pumps, by whichever
// goroutine, continue where the last one stopped. It is not safe for
// concurrent use.
type decoder struct {
	h       transport.Handler
	peer    int
	dropped func() bool // reports whether the peer has been failed

	buf  []byte // buf[r:w] has been read but not decoded
	r, w int

	body   bool             // hdr is decoded; its payload is arriving
	hdr    transport.Header // the frame in progress
	dst    []byte           // the Handler's buffer for its payload
	skip   bool             // the payload is discarded, not delivered
	got    int              // payload bytes received
	direct bool             // the last space went straight into dst
	frames int              // frames completed, delivered or not
	read   int              // bytes read, in all (it may wrap)
}

func newDecoder(h transport.Handler, peer int, dropped func() bool, size int) decoder {
	return decoder{h: h, peer: peer, dropped: dropped, buf: make([]byte, size)}
}

// pump reads from src and decodes what arrives, for at most reads reads
// (reads < 0: no limit), until src is exhausted (errAgain) or, if stop is
// not nil, stop reports true between reads. It returns how many frames it
// completed, and why the stream ended, if it did: io.EOF at a clean end,
// another error otherwise.
//
// Only errAgain counts as exhausted. A short read does not: Linux's TCP
// takes a FIN that came with the last data along with that data, so the
// read that returns the data is short while the end of stream is still to
// be read, and no new readiness will announce it.
func (d *decoder) pump(src source, reads int, stop func() bool) (frames int, err error) {
	start := d.frames
	for ; reads != 0; reads-- {
		n, err := src.Read(d.space())
		if n > 0 {
			d.read += n
			if err := d.filled(n); err != nil {
				return d.frames - start, err
			}
		}
		switch {
		case err == errAgain:
			return d.frames - start, nil
		case err != nil:
			return d.frames - start, err
		case n == 0:
			return d.frames - start, d.end()
		}
		if stop != nil && stop() {
			break
		}
	}
	return d.frames - start, nil
}

// space returns where the next read goes: straight into the Handler's
// buffer when the rest of a payload is at least a read buffer long and
// nothing is buffered (so large messages land without a copy), else the
// free part of the read buffer.
func (d *decoder) space() []byte {
	if d.body && !d.skip && d.r == d.w && d.hdr.Len-d.got >= len(d.buf) {
		d.direct = true
		return d.dst[d.got:]
	}
	d.direct = false
	if d.r > 0 { // less than a header is left: move it to the front
		d.w = copy(d.buf, d.buf[d.r:d.w])
		d.r = 0
	}
	return d.buf[d.w:]
}

// filled takes n bytes read into the last space and decodes them.
func (d *decoder) filled(n int) error {
	if d.direct {
		d.got += n
		if d.got == d.hdr.Len {
			d.finish()
		}
		return nil
	}
	d.w += n
	return d.decode()
}

// decode consumes the buffered bytes: complete headers and what payload
// they hold. It stops with less than a header, or with the buffer empty
// and a payload incomplete.
func (d *decoder) decode() error {
	for {
		if !d.body {
			if d.w-d.r < headerSize {
				return nil
			}
			h, err := parseHeader(d.buf[d.r : d.r+headerSize])
			if err != nil {
				return err
			}
			d.r += headerSize
			if err := d.begin(h); err != nil {
				return err
			}
		}
		n := min(d.w-d.r, d.hdr.Len-d.got)
		if !d.skip {
			copy(d.dst[d.got:], d.buf[d.r:d.r+n])
		}
		d.r += n
		d.got += n
		if d.got < d.hdr.Len {
			return nil
		}
		d.finish()
	}
}

// begin starts the payload of h: into the Handler's buffer, or discarded
// once the peer has been failed.
func (d *decoder) begin(h transport.Header) error {
	d.body, d.hdr, d.got = true, h, 0
	d.skip = d.dropped()
	if d.skip {
		return nil
	}
	d.dst = d.h.Buffer(d.peer, h)
	if len(d.dst) != h.Len {
		return fmt.Errorf("handler gave a %d-byte buffer for a %d-byte message (comm %d, tag %d)",
			len(d.dst), h.Len, h.Comm, h.Tag)
	}
	return nil
}

// finish delivers the completed frame, unless the peer has been failed
// meanwhile.
func (d *decoder) finish() {
	dst := d.dst
	d.body, d.dst = false, nil // do not keep the receiver's buffer alive
	d.frames++
	if !d.skip && !d.dropped() {
		d.h.Deliver(d.peer, d.hdr, dst)
	}
}

// end is the error for a stream that ended here: io.EOF between frames,
// io.ErrUnexpectedEOF inside one.
func (d *decoder) end() error {
	if d.body || d.w > d.r {
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}
