package safetensors

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// ErrFormat is wrapped by every error that says the input is not a valid
// safetensors file: truncated, corrupted, or malformed. Check it with
// errors.Is.
var ErrFormat = errors.New("not a valid safetensors file")

// formatError is a message about malformed input; it wraps ErrFormat
// without repeating ErrFormat's text, so that ReadFile can say
// "path: truncated: ..." and Decode "safetensors: truncated: ...".
type formatError struct{ msg string }

func formatErrorf(format string, args ...any) error {
	return &formatError{msg: fmt.Sprintf(format, args...)}
}

func (e *formatError) Error() string { return e.msg }
func (e *formatError) Unwrap() error { return ErrFormat }

// File is a decoded safetensors file. Nothing in this package changes a File
// after Decode returns it, so goroutines may read one concurrently.
type File struct {
	// Metadata is the header's "__metadata__" object, or nil if it has none.
	Metadata map[string]string
	// Tensors holds every tensor in the order of its data in the buffer.
	Tensors []Tensor

	index map[string]int // Tensors' positions by name; nil for a File built by hand
}

// Tensor returns the tensor called name and whether there is one.
func (f *File) Tensor(name string) (Tensor, bool) {
	if f.index != nil {
		i, ok := f.index[name]
		if !ok {
			return Tensor{}, false
		}
		return f.Tensors[i], true
	}
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// Decode parses a whole safetensors file held in data. The tensors' Data
// slices share data's memory (capped, so appending to one copies it); copy
// them to keep them past data's reuse.
//
// data is treated as untrusted: Decode checks everything the reference
// reader checks, and rejects duplicate names and unknown header fields too.
// Every such error wraps ErrFormat and says what was wrong and, where one is
// to blame, which tensor.
func Decode(data []byte) (*File, error) {
	f, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return f, nil
}

// decode is Decode without the package prefix on its errors.
func decode(data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, formatErrorf("truncated: %d bytes, too short for the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeaderSize {
		return nil, formatErrorf("header length %d is over the limit of %d bytes", n, MaxHeaderSize)
	}
	if rest := uint64(len(data) - 8); n > rest {
		return nil, formatErrorf("truncated: header length says %d bytes, file has %d after the length", n, rest)
	}
	h, err := parseHeader(data[8 : 8+n])
	if err != nil {
		return nil, err
	}
	buf := data[8+n:]
	size, err := checkLayout(h.entries)
	if err != nil {
		return nil, err
	}
	if size > uint64(len(buf)) {
		return nil, formatErrorf("truncated: header says %d bytes of data, file has %d", size, len(buf))
	}
	if size < uint64(len(buf)) {
		return nil, formatErrorf("%d bytes of data follow the last tensor (header says %d bytes of data, file has %d)",
			uint64(len(buf))-size, size, len(buf))
	}
	f := &File{
		Metadata: h.metadata,
		Tensors:  make([]Tensor, len(h.entries)),
		index:    make(map[string]int, len(h.entries)),
	}
	for i, e := range h.entries {
		f.Tensors[i] = Tensor{Name: e.name, DType: e.dtype, Shape: e.shape, Data: buf[e.begin:e.end:e.end]}
		f.index[e.name] = i
	}
	return f, nil
}

// checkLayout checks that each entry's byte range matches its shape and
// dtype and that together they cover [0, size) without gaps or overlaps, as
// the reference requires. It sorts entries by offset and returns size.
func checkLayout(entries []entry) (uint64, error) {
	for _, e := range entries {
		if e.begin > e.end {
			return 0, formatErrorf("tensor %q: data_offsets [%d, %d] end before they begin", e.name, e.begin, e.end)
		}
		need, ok := dataSize(e.shape, e.dtype)
		if !ok {
			return 0, formatErrorf("tensor %q: shape %v of %v is too large: its byte size overflows",
				e.name, e.shape, e.dtype)
		}
		if e.end-e.begin != uint64(need) {
			return 0, formatErrorf("tensor %q: data_offsets [%d, %d] hold %d bytes, shape %v of %v needs %d",
				e.name, e.begin, e.end, e.end-e.begin, e.shape, e.dtype, need)
		}
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end))
	})
	var pos uint64
	for i, e := range entries {
		switch {
		case e.begin > pos:
			return 0, formatErrorf("tensor %q: data_offsets [%d, %d] leave bytes [%d, %d) of the data unused",
				e.name, e.begin, e.end, pos, e.begin)
		case e.begin < pos:
			prev := entries[i-1]
			return 0, formatErrorf("tensor %q: data_offsets [%d, %d] overlap tensor %q at [%d, %d]",
				e.name, e.begin, e.end, prev.name, prev.begin, prev.end)
		}
		pos = e.end
	}
	return pos, nil
}
