package trace

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// File is one rank's decoded trace.
type File struct {
	Header  Header
	Strings []string         // by id; Str reads them
	Comms   map[uint32][]int // communicator id -> members' world ranks
	Offset  int64            // add to this rank's times for rank 0's clock
	RTT     int64            // the round trip the offset was measured with; 0: no clock record
	Events  []Event          // in the order they were written (by end, mostly)
	Written uint64           // the end record's count of events
	End     int64            // the end record's time of Close
	Done    bool             // the end record was read
}

// Str returns string id, or "" for an id the file never defined.
func (f *File) Str(id uint32) string {
	if int(id) < len(f.Strings) {
		return f.Strings[id]
	}
	return ""
}

// ReadFile decodes the trace file at path. On a damaged or truncated file
// it returns what it decoded before the damage and an error that says
// where it is (which wraps ErrCorrupt or ErrTruncated); an empty file's
// error wraps ErrEmpty.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var hint int
	if fi, err := fh.Stat(); err == nil {
		hint = int(min(fi.Size()/16, 1<<24)) // events are 16-20 bytes on disk
	}
	f, err := read(fh, hint)
	if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return f, err
}

// ReadHeader decodes only the header of the trace file at path.
func ReadHeader(path string) (Header, error) {
	fh, err := os.Open(path)
	if err != nil {
		return Header{}, err
	}
	defer fh.Close()
	d := &decoder{r: bufio.NewReaderSize(fh, 4<<10), f: &File{Strings: []string{""}, Comms: map[uint32][]int{}}, headerOnly: true}
	if err := d.run(); err != nil {
		return Header{}, fmt.Errorf("%s: %w", path, err)
	}
	return d.f.Header, nil
}

// Read decodes a trace from r: see ReadFile.
func Read(r io.Reader) (*File, error) { return read(r, 0) }

// read decodes a trace expected to hold about hint events.
func read(r io.Reader, hint int) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 256<<10), f: &File{Strings: []string{""}, Comms: map[uint32][]int{}}, hint: hint}
	err := d.run()
	return d.f, err
}

type decoder struct {
	r    *bufio.Reader
	f    *File
	off  int64 // bytes consumed
	last int64
	hint int // about how many events, once the header says this is a trace
	p    []byte

	headerOnly bool // stop after the header
}

func (d *decoder) run() error {
	magic := make([]byte, len(Magic))
	n, err := io.ReadFull(d.r, magic)
	if n == 0 && err == io.EOF {
		return fmt.Errorf("%w (0 bytes): a recorder writes its header as it opens the file, so this one was cut to nothing or not written by gorun", ErrEmpty)
	}
	if err != nil || string(magic) != Magic {
		if n > 0 && magic[0] == '{' {
			return fmt.Errorf("%w: a version 1 trace (JSON lines, from an older gorun): this goprof reads version %d; profile the job again", ErrCorrupt, Version)
		}
		return fmt.Errorf("%w: not a gorun trace file (no %q at byte 0)", ErrCorrupt, Magic)
	}
	d.off = int64(len(Magic))
	first := true
	for {
		start := d.off
		k, err := d.r.ReadByte()
		if err == io.EOF {
			if first {
				return fmt.Errorf("%w: no header after the magic (byte %d)", ErrTruncated, d.off)
			}
			return fmt.Errorf("%w: it stops at byte %d after %d events (the rank crashed, was killed or is still running)", ErrTruncated, d.off, len(d.f.Events))
		}
		if err != nil {
			return err
		}
		d.off++
		n, err := binary.ReadUvarint(countingReader{d})
		if err != nil {
			return d.cut(start, err)
		}
		if n > maxRecord {
			return fmt.Errorf("%w: record at byte %d claims %d bytes", ErrCorrupt, start, n)
		}
		if cap(d.p) < int(n) {
			d.p = make([]byte, n)
		}
		d.p = d.p[:n]
		if _, err := io.ReadFull(d.r, d.p); err != nil {
			return d.cut(start, err)
		}
		d.off += int64(n)
		if first && k != recHeader {
			return fmt.Errorf("%w: first record (byte %d) is not the header", ErrCorrupt, start)
		}
		first = false
		if err := d.record(k, d.p); err != nil {
			return fmt.Errorf("%w: record at byte %d: %v", ErrCorrupt, start, err)
		}
		if d.headerOnly {
			return nil
		}
		if k == recEnd {
			d.f.Done = true
			return nil
		}
	}
}

// cut is the error for a record that ends early.
func (d *decoder) cut(start int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the record at byte %d is cut short, after %d events", ErrTruncated, start, len(d.f.Events))
	}
	return fmt.Errorf("%w: record at byte %d: %v", ErrCorrupt, start, err)
}

type countingReader struct{ d *decoder }

func (c countingReader) ReadByte() (byte, error) {
	b, err := c.d.r.ReadByte()
	if err == nil {
		c.d.off++
	}
	return b, err
}

func (d *decoder) record(k byte, p []byte) error {
	b := buf{p: p}
	switch k {
	case recHeader:
		if err := json.Unmarshal(p, &d.f.Header); err != nil {
			return fmt.Errorf("header: %v", err)
		}
		if v := d.f.Header.Version; v != Version {
			return fmt.Errorf("format version %d; this goprof reads version %d", v, Version)
		}
		if d.f.Header.Rank < 0 || d.f.Header.Size <= 0 || d.f.Header.Rank >= d.f.Header.Size {
			return fmt.Errorf("header: rank %d of %d", d.f.Header.Rank, d.f.Header.Size)
		}
		if d.f.Events == nil {
			d.f.Events = make([]Event, 0, d.hint)
		}
	case recString:
		id := b.uvarint()
		if b.err == nil && id != uint64(len(d.f.Strings)) {
			return fmt.Errorf("string %d defined out of order (next is %d)", id, len(d.f.Strings))
		}
		if len(d.f.Strings) >= maxStrings {
			return fmt.Errorf("more than %d strings", maxStrings)
		}
		d.f.Strings = append(d.f.Strings, string(b.rest()))
	case recComm:
		id, n := uint32(b.uvarint()), b.uvarint()
		if n > maxMembers || n > uint64(len(b.p)) {
			return fmt.Errorf("communicator %d claims %d members", id, n)
		}
		m := make([]int, n)
		for i := range m {
			m[i] = int(b.uvarint())
		}
		d.f.Comms[id] = m
	case recClock:
		d.f.Offset, d.f.RTT = b.varint(), int64(b.uvarint())
	case recEvent:
		e, err := d.event(&b)
		if err != nil {
			return err
		}
		d.f.Events = append(d.f.Events, e)
	case recEnd:
		d.f.Written, d.f.End = b.uvarint(), int64(b.uvarint())
	default:
		return nil // a later version's record: skipped
	}
	return b.err
}

func (d *decoder) event(b *buf) (Event, error) {
	var e Event
	if len(b.p) < 2 {
		return e, errors.New("event too short")
	}
	e.Kind, e.Flags = Kind(b.p[0]), Flags(b.p[1])
	b.p = b.p[2:]
	e.Track = b.id(len(d.f.Strings))
	delta := b.varint()
	if (delta > 0 && d.last > math.MaxInt64/2-delta) || (delta < 0 && d.last < math.MinInt64/2-delta) {
		return e, fmt.Errorf("event starts at %d%+d ns", d.last, delta)
	}
	e.Start = d.last + delta
	dur := b.uvarint()
	if dur > 1<<62 || e.Start > math.MaxInt64-int64(dur) {
		return e, fmt.Errorf("event lasts %d ns from %d", dur, e.Start)
	}
	e.End = e.Start + int64(dur)
	d.last = e.Start
	e.Peer = -1
	switch e.Kind {
	case SendEvent, RecvEvent, WaitEvent:
		e.Comm = uint32(b.uvarint())
		e.Peer = int32(b.varint())
		e.Tag = int32(b.varint())
		e.Bytes = int64(b.uvarint())
		e.Site = b.id(len(d.f.Strings))
		e.Name = b.id(len(d.f.Strings))
	case CollectiveEvent:
		e.Comm = uint32(b.uvarint())
		e.Name = b.id(len(d.f.Strings))
		e.Algo = b.id(len(d.f.Strings))
		e.Bytes = int64(b.uvarint())
		e.Seq = b.uvarint()
		e.Predicted = int64(b.uvarint())
		e.Site = b.id(len(d.f.Strings))
	case RegionEvent:
		e.Name = b.id(len(d.f.Strings))
	case MemoryEvent:
		e.Bytes = int64(b.uvarint())
	default:
		return e, fmt.Errorf("unknown event kind %d", e.Kind)
	}
	if b.err != nil {
		return e, fmt.Errorf("%s event: %v", e.Kind, b.err)
	}
	if e.Bytes < 0 || e.Predicted < 0 {
		return e, fmt.Errorf("%s event: a negative size", e.Kind)
	}
	return e, nil
}

// buf reads a record's payload; its first error sticks.
type buf struct {
	p   []byte
	err error
}

func (b *buf) uvarint() uint64 {
	if b.err != nil {
		return 0
	}
	v, n := binary.Uvarint(b.p)
	if n <= 0 {
		b.err = errors.New("bad or missing integer")
		return 0
	}
	b.p = b.p[n:]
	return v
}

func (b *buf) varint() int64 {
	if b.err != nil {
		return 0
	}
	v, n := binary.Varint(b.p)
	if n <= 0 {
		b.err = errors.New("bad or missing integer")
		return 0
	}
	b.p = b.p[n:]
	return v
}

// id reads a string id, which must be one already defined.
func (b *buf) id(defined int) uint32 {
	v := b.uvarint()
	if b.err == nil && v >= uint64(defined) {
		b.err = fmt.Errorf("string id %d not defined yet", v)
	}
	return uint32(v)
}

func (b *buf) rest() []byte {
	p := b.p
	b.p = nil
	return p
}
