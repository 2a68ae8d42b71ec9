package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header, in bytes, that Encode writes and
// Decode accepts; the reference implementation has the same limit.
const MaxHeaderSize = 100_000_000

// Encode writes tensors and metadata to w in the safetensors format. The
// tensors are laid out in the order given (see Sort for the reference
// writer's order); the header lists them in that order after the metadata,
// whose keys are sorted. A nil or empty metadata map writes no
// "__metadata__" entry.
//
// Encode checks every tensor before it writes anything: a name that is not
// valid UTF-8, reserved ("__metadata__") or repeated, an unsupported
// dtype, or a data length that does not match the shape fails, wrapping
// ErrInvalid. The data is streamed through one buffer; no copy of the
// tensors is made.
func Encode(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	hdr, err := encodeHeader(tensors, metadata)
	if err == nil {
		err = writeEncoded(w, hdr, tensors)
	}
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// writeEncoded writes the length prefix, the padded header hdr and the data
// of tensors to w.
func writeEncoded(w io.Writer, hdr []byte, tensors []Tensor) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(hdr)))
	if _, err := bw.Write(prefix[:]); err != nil {
		return fmt.Errorf("writing the header: %w", err)
	}
	if _, err := bw.Write(hdr); err != nil {
		return fmt.Errorf("writing the header: %w", err)
	}
	for _, t := range tensors {
		if _, err := bw.Write(t.Data); err != nil {
			return fmt.Errorf("writing tensor %q: %w", t.Name, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the data: %w", err)
	}
	return nil
}

// encodeHeader checks tensors and metadata and returns the header as the
// reference writer formats it, padded with spaces to a multiple of 8 bytes.
func encodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(metadata) > 0 {
		if err := writeMetadata(&b, metadata); err != nil {
			return nil, err
		}
	}
	seen := make(map[string]bool, len(tensors))
	offset := 0
	for i, t := range tensors {
		if err := t.check(seen); err != nil {
			return nil, err
		}
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		writeString(&b, t.Name)
		b.WriteString(`:{"dtype":`)
		writeString(&b, t.DType.String())
		b.WriteString(`,"shape":[`)
		for j, dim := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(dim))
		}
		b.WriteString(`],"data_offsets":[`)
		b.WriteString(strconv.Itoa(offset))
		b.WriteByte(',')
		offset += len(t.Data)
		b.WriteString(strconv.Itoa(offset))
		b.WriteString("]}")
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("%w: the header of %d tensors takes %d bytes, over the limit of %d",
			ErrInvalid, len(tensors), b.Len(), MaxHeaderSize)
	}
	return b.Bytes(), nil
}

// writeMetadata writes the "__metadata__" entry with its keys sorted.
func writeMetadata(b *bytes.Buffer, metadata map[string]string) error {
	keys := make([]string, 0, len(metadata))
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: metadata %q: %q is not valid UTF-8", ErrInvalid, k, v)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	writeString(b, metadataKey)
	b.WriteString(":{")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, k)
		b.WriteByte(':')
		writeString(b, metadata[k])
	}
	b.WriteByte('}')
	return nil
}

// writeString writes s as a JSON string escaped as serde_json (the
// reference) and Python's json.dumps(ensure_ascii=False) escape it: quote,
// backslash and control characters only, with lowercase hex; everything else,
// non-ASCII included, as is. s must be valid UTF-8.
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}
