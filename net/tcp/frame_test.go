package tcp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
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
// anything larger gets a wrong-sized buffer, which must drop the peer.
type fuzzHandler struct {
	limit     int
	delivered int
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
}

func (h *fuzzHandler) Lost(int, error) {}

func FuzzFrameReader(f *testing.F) {
	var stream []byte
	for i, p := range [][]byte{nil, []byte("abc"), make([]byte, 100)} {
		b := make([]byte, headerSize)
		putHeader(b, transport.Header{Tag: int32(i), Len: len(p)})
		stream = append(append(stream, b...), p...)
	}
	f.Add(stream)
	f.Add(stream[:len(stream)-1])
	f.Add(append(stream[:headerSize:headerSize], 0xff, 0xff))
	f.Fuzz(func(t *testing.T, in []byte) {
		h := &fuzzHandler{limit: len(in)}
		r := frameReader{
			br:      bufio.NewReaderSize(bytes.NewReader(in), 16),
			h:       h,
			dropped: func() bool { return false },
		}
		err := r.run()
		if err == nil {
			t.Fatal("run ended without an error")
		}
		if h.delivered > len(in) {
			t.Fatalf("delivered %d bytes from %d bytes of input", h.delivered, len(in))
		}
		if err == io.EOF && h.delivered != len(in) {
			t.Fatalf("clean end after %d of %d bytes", h.delivered, len(in))
		}
	})
}
