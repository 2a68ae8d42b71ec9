package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name string
		h    transport.Header
	}{
		{"zero", transport.Header{}},
		{"world tag", transport.Header{Comm: 0, Tag: 5, Len: 8}},
		{"reserved tag", transport.Header{Comm: 1<<32 - 1, Tag: -1 << 31, Len: 1}},
		{"one GiB", transport.Header{Comm: 3, Tag: 1<<31 - 1, Len: 1 << 30}},
		{"limit", transport.Header{Len: MaxPayload}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b [headerSize]byte
			putHeader(b[:], c.h)
			got, err := parseHeader(b[:])
			if err != nil || got != c.h {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.h)
			}
		})
	}
}

func TestParseHeaderRejects(t *testing.T) {
	valid := func() []byte {
		b := make([]byte, headerSize)
		putHeader(b, transport.Header{Len: 1})
		return b
	}
	for _, c := range []struct {
		name  string
		patch func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:headerSize-1] }},
		{"bad magic", func(b []byte) []byte { b[0] = 'x'; return b }},
		{"future version", func(b []byte) []byte { b[3] = 2; return b }},
		{"over the limit", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[12:], MaxPayload+1)
			return b
		}},
		{"all ones length", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[12:], 1<<64-1)
			return b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseHeader(c.patch(valid())); !errors.Is(err, errMalformed) {
				t.Fatalf("got %v, want errMalformed", err)
			}
		})
	}
}

func FuzzFrameHeader(f *testing.F) {
	for _, h := range []transport.Header{{}, {Comm: 1, Tag: -2, Len: 3}, {Len: MaxPayload}} {
		b := make([]byte, headerSize)
		putHeader(b, h)
		f.Add(b)
	}
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		if h.Len < 0 || h.Len > MaxPayload {
			t.Fatalf("accepted length %d", h.Len)
		}
		var again [headerSize]byte
		putHeader(again[:], h)
		if !bytes.Equal(again[:], b[:headerSize]) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b[:headerSize], h, again)
		}
	})
}

// fuzzHandler hands out buffers only for lengths the input can fill;
// anything larger gets a wrong-sized buffer, which must drop the peer. It
// records what it delivers.
type fuzzHandler struct {
	limit     int
	delivered int
	got       []string
}

func (h *fuzzHandler) Buffer(_ int, hd transport.Header) []byte {
	if hd.Len > h.limit {
		return nil
	}
	return make([]byte, hd.Len)
}

func (h *fuzzHandler) Deliver(_ int, hd transport.Header, p []byte) {
	if len(p) != hd.Len {
		panic("delivered a payload of the wrong length")
	}
	h.delivered += len(p) + headerSize
	h.got = append(h.got, fmt.Sprintf("%d/%d:%x", hd.Comm, hd.Tag, p))
}

func (h *fuzzHandler) Lost(int, error) {}

// chunkSource hands out its input at most chunk bytes per read, and
// answers every other read with errAgain, as a socket that data reaches in
// pieces does.
type chunkSource struct {
	in    []byte
	chunk int
	calls int
}

func (s *chunkSource) Read(p []byte) (int, error) {
	if s.calls++; s.calls%2 == 0 {
		return 0, errAgain
	}
	n := copy(p, s.in[:min(len(s.in), s.chunk)])
	s.in = s.in[n:]
	return n, nil
}

// decodeAll runs a decoder with a small read buffer over in, read chunk
// bytes at a time, until the stream ends.
func decodeAll(in []byte, chunk int) (*fuzzHandler, error) {
	h := &fuzzHandler{limit: len(in)}
	d := newDecoder(h, 0, func() bool { return false }, 16)
	src := &chunkSource{in: in, chunk: chunk}
	for {
		if _, err := d.pump(src, 3, nil); err != nil {
			return h, err
		}
	}
}

func FuzzDecoder(f *testing.F) {
	var stream []byte
	for i, p := range [][]byte{nil, []byte("abc"), make([]byte, 100)} {
		b := make([]byte, headerSize)
		putHeader(b, transport.Header{Tag: int32(i), Len: len(p)})
		stream = append(append(stream, b...), p...)
	}
	f.Add(stream, uint8(7))
	f.Add(stream[:len(stream)-1], uint8(1))
	f.Add(append(stream[:headerSize:headerSize], 0xff, 0xff), uint8(200))
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		h, err := decodeAll(in, int(chunk)+1)
		if h.delivered > len(in) {
			t.Fatalf("delivered %d bytes from %d bytes of input", h.delivered, len(in))
		}
		if err == io.EOF && h.delivered != len(in) {
			t.Fatalf("clean end after %d of %d bytes", h.delivered, len(in))
		}
		whole, wholeErr := decodeAll(in, len(in)+1)
		if fmt.Sprint(h.got) != fmt.Sprint(whole.got) || (err == nil) != (wholeErr == nil) || err.Error() != wholeErr.Error() {
			t.Fatalf("read %d bytes at a time: %v, %v; read whole: %v, %v", chunk+1, h.got, err, whole.got, wholeErr)
		}
	})
}
