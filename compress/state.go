package compress

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

// ErrState is wrapped by the errors of UnmarshalBinary given a state that
// another codec saved (another name or parameter, or PowerSGD's layout
// under another configuration).
var ErrState = errors.New("codec state does not fit the codec")

// The codecs that keep state between calls save and restore it.
var (
	_ encoding.BinaryMarshaler   = (*topK)(nil)
	_ encoding.BinaryUnmarshaler = (*topK)(nil)
	_ encoding.BinaryMarshaler   = (*randomK)(nil)
	_ encoding.BinaryUnmarshaler = (*randomK)(nil)
	_ encoding.BinaryMarshaler   = (*signSGD)(nil)
	_ encoding.BinaryUnmarshaler = (*signSGD)(nil)
	_ encoding.BinaryMarshaler   = (*qsgd)(nil)
	_ encoding.BinaryUnmarshaler = (*qsgd)(nil)
	_ encoding.BinaryMarshaler   = (*powerSGD)(nil)
	_ encoding.BinaryUnmarshaler = (*powerSGD)(nil)
)

// stateMagic begins every saved codec state; the last byte is the
// format's version.
const stateMagic = "gorun-codec\x01"

// MarshalBinary saves top-k's residuals.
func (t *topK) MarshalBinary() ([]byte, error) {
	return t.ef.appendState(appendHeader(nil, t.name)), nil
}

// UnmarshalBinary replaces top-k's residuals with those saved.
func (t *topK) UnmarshalBinary(b []byte) error {
	d, err := readHeader(b, t.name)
	if err != nil {
		return err
	}
	ef := d.residuals()
	if err := d.end(); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	t.ef = ef
	return nil
}

// MarshalBinary saves random-k's residuals and its count of steps by key
// (which draws the next indices).
func (r *randomK) MarshalBinary() ([]byte, error) {
	b := r.ef.appendState(appendHeader(nil, r.name))
	return appendSteps(b, r.steps), nil
}

// UnmarshalBinary replaces random-k's residuals and steps with those saved.
func (r *randomK) UnmarshalBinary(b []byte) error {
	d, err := readHeader(b, r.name)
	if err != nil {
		return err
	}
	ef, steps := d.residuals(), d.steps()
	if err := d.end(); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	r.ef, r.steps = ef, steps
	return nil
}

// MarshalBinary saves sign's residuals.
func (s *signSGD) MarshalBinary() ([]byte, error) {
	return s.ef.appendState(appendHeader(nil, "sign")), nil
}

// UnmarshalBinary replaces sign's residuals with those saved.
func (s *signSGD) UnmarshalBinary(b []byte) error {
	d, err := readHeader(b, "sign")
	if err != nil {
		return err
	}
	ef := d.residuals()
	if err := d.end(); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	s.ef = ef
	return nil
}

// baseName is QSGD's name without the lossless stage.
func (q *qsgd) baseName() string { return fmt.Sprintf("qsgd:%d", q.levels) }

// MarshalBinary saves QSGD's count of steps by key, which draws the next
// rounding: QSGD has no residuals.
func (q *qsgd) MarshalBinary() ([]byte, error) {
	return appendSteps(appendHeader(nil, q.baseName()), q.steps), nil
}

// UnmarshalBinary replaces QSGD's steps with those saved.
func (q *qsgd) UnmarshalBinary(b []byte) error {
	d, err := readHeader(b, q.baseName())
	if err != nil {
		return err
	}
	steps := d.steps()
	if err := d.end(); err != nil {
		return fmt.Errorf("%s: %w", q.baseName(), err)
	}
	q.steps = steps
	return nil
}

// MarshalBinary saves, for each key, PowerSGD's count of calls, the
// bucket's size and segments, the residuals and the last summed Q.
func (p *powerSGD) MarshalBinary() ([]byte, error) {
	b := appendHeader(nil, p.Name())
	keys := slices.Sorted(maps.Keys(p.keys))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		st := p.keys[k]
		b = binary.AppendVarint(b, int64(k))
		b = binary.AppendUvarint(b, uint64(st.calls))
		b = binary.AppendUvarint(b, uint64(st.size))
		b = binary.AppendUvarint(b, uint64(len(st.segs)))
		for _, s := range st.segs {
			b = binary.AppendVarint(b, int64(s.Off))
			b = binary.AppendVarint(b, int64(s.Rows))
			b = binary.AppendVarint(b, int64(s.Cols))
		}
		fresh := byte(0)
		if st.fresh {
			fresh = 1
		}
		b = append(b, fresh)
		if st.resid == nil {
			b = append(b, 0)
		} else {
			b = appendF32s(append(b, 1), st.resid)
		}
		b = appendF32s(b, st.q)
	}
	return b, nil
}

// UnmarshalBinary replaces PowerSGD's state with the one saved, which a
// codec of the same rank and MinCompression saved: each key's layout is
// made again from its segments and must come out the same.
func (p *powerSGD) UnmarshalBinary(b []byte) error {
	d, err := readHeader(b, p.Name())
	if err != nil {
		return err
	}
	keys := make(map[int]*powerKey)
	for n := d.count(); n > 0 && d.err == nil; n-- {
		key := int(d.varint())
		st, err := p.readKey(d)
		if err != nil {
			return fmt.Errorf("%s: key %d: %w", p.Name(), key, err)
		}
		if _, dup := keys[key]; dup {
			d.fail(fmt.Sprintf("key %d twice", key))
		}
		keys[key] = st
	}
	if err := d.end(); err != nil {
		return fmt.Errorf("%s: %w", p.Name(), err)
	}
	p.keys = keys
	return nil
}

// readKey reads one key's state and makes its layout again; it returns
// nil and no error after a read error, which d keeps.
func (p *powerSGD) readKey(d *stateReader) (*powerKey, error) {
	calls, size := d.uvarint(), d.uvarint()
	segs := make([]Segment, d.count())
	for i := range segs {
		segs[i] = Segment{Off: int(d.varint()), Rows: int(d.varint()), Cols: int(d.varint())}
	}
	fresh, hasResid := d.byte(), d.byte()
	var resid []float32
	if hasResid == 1 {
		resid = d.f32s()
	}
	q := d.f32s()
	if d.err != nil {
		return nil, nil
	}
	if fresh > 1 || hasResid > 1 || calls > math.MaxInt32 || size > math.MaxInt {
		d.fail("bad key state")
		return nil, nil
	}
	// The layout allocates Q as the segments say: check them against
	// the Q saved first, so that a corrupt state cannot ask for much.
	nq := 0
	for _, s := range segs {
		if s.Rows < 0 || s.Cols < 0 {
			break // layout says what is wrong
		}
		if r := p.rank(s); r > 0 {
			if nq += r * min(s.Cols, len(q)+1); nq > len(q) {
				break
			}
		}
	}
	mismatch := fmt.Errorf("%w: its saved Q has %d floats where this codec's layout of its segments has %d: was it saved with another MinCompression?", ErrState, len(q), nq)
	if nq != len(q) {
		return nil, mismatch
	}
	st, err := p.layout(int(size), segs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	if len(st.q) != len(q) {
		return nil, mismatch
	}
	if resid != nil && len(resid) != st.residLen() {
		d.fail(fmt.Sprintf("residuals of %d floats for matrices of %d", len(resid), st.residLen()))
		return nil, nil
	}
	st.calls, st.fresh, st.resid, st.q = int(calls), fresh == 1, resid, q
	return st, nil
}

// residLen is the length of st's packed residuals.
func (st *powerKey) residLen() int {
	n := 0
	for _, mt := range st.mats {
		n += mt.n * mt.m
	}
	return n
}

// appendState appends the residuals, keys in increasing order.
func (r *Residuals) appendState(b []byte) []byte {
	keys := slices.Sorted(maps.Keys(r.m))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendVarint(b, int64(k))
		b = appendF32s(b, r.m[k])
	}
	return b
}

// appendSteps appends a count of steps by key, keys in increasing order.
func appendSteps(b []byte, steps map[int]uint64) []byte {
	keys := slices.Sorted(maps.Keys(steps))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendVarint(b, int64(k))
		b = binary.AppendUvarint(b, steps[k])
	}
	return b
}

// appendHeader appends the magic and the codec's name.
func appendHeader(b []byte, name string) []byte {
	b = append(b, stateMagic...)
	b = binary.AppendUvarint(b, uint64(len(name)))
	return append(b, name...)
}

// appendF32s appends the length of v and its elements' bits, little
// endian.
func appendF32s(b []byte, v []float32) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// stateReader reads a saved state as untrusted bytes: after its first
// error every read returns zero, and no length is believed beyond the
// bytes left.
type stateReader struct {
	b   []byte
	err error
}

// readHeader checks b's magic and that the codec it names is want.
func readHeader(b []byte, want string) (*stateReader, error) {
	d := &stateReader{b: b}
	if len(b) < len(stateMagic) || string(b[:len(stateMagic)]) != stateMagic {
		return nil, fmt.Errorf("%s: %w: not a codec state saved by MarshalBinary of this version", want, ErrCorrupt)
	}
	d.b = b[len(stateMagic):]
	n := d.count()
	name := string(d.take(n))
	if d.err != nil {
		return nil, fmt.Errorf("%s: %w", want, d.err)
	}
	if name != want {
		return nil, fmt.Errorf("%s: %w: it is the state of %s; restore it into a codec made from the same --compress", want, ErrState, name)
	}
	return d, nil
}

func (d *stateReader) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: codec state: %s at %d bytes from the end", ErrCorrupt, what, len(d.b))
	}
	d.b = nil
}

func (d *stateReader) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stateReader) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length or count, which is never more than the bytes
// left (every counted thing takes at least a byte).
func (d *stateReader) count() int {
	v := d.uvarint()
	if v > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("count %d beyond the data", v))
		return 0
	}
	return int(v)
}

func (d *stateReader) take(n int) []byte {
	if n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *stateReader) byte() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *stateReader) f32s() []float32 {
	v := d.uvarint()
	if v > uint64(len(d.b))/4 {
		d.fail(fmt.Sprintf("%d floats beyond the data", v))
		return nil
	}
	raw := d.take(4 * int(v))
	out := make([]float32, v)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// residuals reads what Residuals.appendState wrote.
func (d *stateReader) residuals() Residuals {
	n := d.count()
	r := Residuals{m: make(map[int][]float32, n)}
	for ; n > 0 && d.err == nil; n-- {
		k := int(d.varint())
		if _, dup := r.m[k]; dup {
			d.fail(fmt.Sprintf("key %d twice", k))
		}
		r.m[k] = d.f32s()
	}
	return r
}

// steps reads what appendSteps wrote.
func (d *stateReader) steps() map[int]uint64 {
	n := d.count()
	m := make(map[int]uint64, n)
	for ; n > 0 && d.err == nil; n-- {
		k := int(d.varint())
		if _, dup := m[k]; dup {
			d.fail(fmt.Sprintf("key %d twice", k))
		}
		m[k] = d.uvarint()
	}
	return m
}

// end is the reader's error, or one if bytes are left over.
func (d *stateReader) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d bytes left over", len(d.b)))
	}
	return d.err
}
