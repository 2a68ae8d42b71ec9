package tcp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// MaxPayload is the largest payload a frame may announce (64 GiB). A peer
// that announces more is dropped as malformed rather than trusted.
const MaxPayload = 1 << 36

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

// readBufferSize is the size of each connection's buffered reader.
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
	if n > MaxPayload || uint64(int(n)) != n {
		return transport.Header{}, fmt.Errorf("%w: payload of %d bytes exceeds the %d-byte limit", errMalformed, n, MaxPayload)
	}
	return transport.Header{
		Comm: binary.LittleEndian.Uint32(b[4:8]),
		Tag:  int32(binary.LittleEndian.Uint32(b[8:12])),
		Len:  int(n),
	}, nil
}

// frameReader reads the frames of one connection and hands them to a
// Handler. It is used by one goroutine only.
type frameReader struct {
	br      *bufio.Reader
	peer    int
	h       transport.Handler
	dropped func() bool // reports whether the peer has been failed
	hdr     [headerSize]byte
}

// run reads frames until the stream ends or fails, and returns why. Once
// dropped reports true it stops calling the Handler and discards the rest of
// the stream (so that a half-closed peer can finish sending), returning at
// end of stream or the first read error.
func (r *frameReader) run() error {
	for {
		if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
			return err
		}
		h, err := parseHeader(r.hdr[:])
		if err != nil {
			return err
		}
		if r.dropped() {
			if _, err := r.br.Discard(h.Len); err != nil {
				return err
			}
			continue
		}
		if err := r.one(h); err != nil {
			return err
		}
	}
}

// one reads the payload of h into the Handler's buffer and delivers it.
func (r *frameReader) one(h transport.Header) error {
	buf := r.h.Buffer(r.peer, h)
	if len(buf) != h.Len {
		return fmt.Errorf("handler gave a %d-byte buffer for a %d-byte message (comm %d, tag %d)",
			len(buf), h.Len, h.Comm, h.Tag)
	}
	if _, err := io.ReadFull(r.br, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if r.dropped() {
		return nil
	}
	r.h.Deliver(r.peer, h, buf)
	return nil
}
