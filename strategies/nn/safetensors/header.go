package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// entry is one tensor's line of the header, before its offsets are checked
// against the others.
type entry struct {
	name       string
	dtype      DType
	shape      []int
	begin, end uint64
}

// header is a parsed header: the metadata (nil when absent) and the entries
// in the order they appear.
type header struct {
	metadata map[string]string
	entries  []entry
}

// headerParser reads a header with a token decoder, so that it can reject
// duplicate keys, match field names exactly and stop at the first error.
type headerParser struct {
	dec *json.Decoder
}

// parseHeader parses the JSON header b. It checks each entry on its own
// (known dtype, shape, data_offsets); checking the entries against each
// other and against the buffer is left to the caller.
func parseHeader(b []byte) (*header, error) {
	if !utf8.Valid(b) {
		return nil, formatErrorf("the header is not valid UTF-8")
	}
	p := &headerParser{dec: json.NewDecoder(bytes.NewReader(b))}
	p.dec.UseNumber()
	if err := p.delim('{'); err != nil {
		return nil, formatErrorf("the header is not a JSON object: %v", err)
	}
	h := &header{}
	seen := make(map[string]bool)
	for p.dec.More() {
		name, err := p.key()
		if err != nil {
			return nil, formatErrorf("the header is not valid JSON: %v", err)
		}
		if seen[name] {
			return nil, formatErrorf("the header names %q twice", name)
		}
		seen[name] = true
		if name == metadataKey {
			if h.metadata, err = p.metadata(); err != nil {
				return nil, err
			}
			continue
		}
		e, err := p.entry(name)
		if err != nil {
			return nil, err
		}
		h.entries = append(h.entries, e)
	}
	if err := p.delim('}'); err != nil {
		return nil, formatErrorf("the header is not valid JSON: %v", err)
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, formatErrorf("the header has more after its JSON object (only spaces may pad it)")
	}
	return h, nil
}

// token reads the next token; running out of input is an error.
func (p *headerParser) token() (json.Token, error) {
	tok, err := p.dec.Token()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, errors.New("the header ends early")
	}
	return tok, err
}

// delim reads the delimiter want.
func (p *headerParser) delim(want json.Delim) error {
	tok, err := p.token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("found %s, want %q", describe(tok), want)
	}
	return nil
}

// key reads an object key.
func (p *headerParser) key() (string, error) {
	tok, err := p.token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok { // the decoder yields only strings here; stay safe regardless
		return "", fmt.Errorf("found %s where a key belongs", describe(tok))
	}
	return key, nil
}

// metadata reads the "__metadata__" value: an object of strings, or null.
func (p *headerParser) metadata() (map[string]string, error) {
	tok, err := p.token()
	if err != nil {
		return nil, formatErrorf("%s: %v", metadataKey, err)
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('{') {
		return nil, formatErrorf("%s is %s, not an object of strings", metadataKey, describe(tok))
	}
	md := make(map[string]string)
	for p.dec.More() {
		k, err := p.key()
		if err != nil {
			return nil, formatErrorf("%s: %v", metadataKey, err)
		}
		if _, dup := md[k]; dup {
			return nil, formatErrorf("%s names %q twice", metadataKey, k)
		}
		tok, err := p.token()
		if err != nil {
			return nil, formatErrorf("%s: %v", metadataKey, err)
		}
		v, ok := tok.(string)
		if !ok {
			return nil, formatErrorf("%s: %q is %s, not a string", metadataKey, k, describe(tok))
		}
		md[k] = v
	}
	if err := p.delim('}'); err != nil {
		return nil, formatErrorf("%s: %v", metadataKey, err)
	}
	return md, nil
}

// entry reads the object describing tensor name.
func (p *headerParser) entry(name string) (entry, error) {
	e := entry{name: name}
	fail := func(format string, args ...any) (entry, error) {
		return entry{}, formatErrorf("tensor %q: "+format, append([]any{name}, args...)...)
	}
	if err := p.delim('{'); err != nil {
		return fail("not an object: %v", err)
	}
	var have struct{ dtype, shape, offsets bool }
	for p.dec.More() {
		field, err := p.key()
		if err != nil {
			return fail("%v", err)
		}
		var dup bool
		switch field {
		case "dtype":
			dup, have.dtype = have.dtype, true
			err = p.dtype(&e)
		case "shape":
			dup, have.shape = have.shape, true
			err = p.shape(&e)
		case "data_offsets":
			dup, have.offsets = have.offsets, true
			err = p.offsets(&e)
		default:
			return fail("unknown field %q (want dtype, shape and data_offsets)", field)
		}
		if dup {
			return fail("field %q appears twice", field)
		}
		if err != nil {
			return fail("%v", err)
		}
	}
	if err := p.delim('}'); err != nil {
		return fail("%v", err)
	}
	switch {
	case !have.dtype:
		return fail("no dtype")
	case !have.shape:
		return fail("no shape")
	case !have.offsets:
		return fail("no data_offsets")
	}
	return e, nil
}

// dtype reads the dtype field.
func (p *headerParser) dtype(e *entry) error {
	tok, err := p.token()
	if err != nil {
		return err
	}
	code, ok := tok.(string)
	if !ok {
		return fmt.Errorf("dtype is %s, not a string", describe(tok))
	}
	if e.dtype, ok = parseDType(code); !ok {
		return fmt.Errorf("unknown or unsupported dtype %q (supported: %s)", code, supportedCodes())
	}
	return nil
}

// shape reads the shape field, an array of non-negative integers.
func (p *headerParser) shape(e *entry) error {
	dims, err := p.uints("shape")
	if err != nil {
		return err
	}
	e.shape = make([]int, len(dims))
	for i, d := range dims {
		if d > math.MaxInt {
			return fmt.Errorf("shape dimension %d is too large", d)
		}
		e.shape[i] = int(d)
	}
	return nil
}

// offsets reads the data_offsets field, an array of two integers.
func (p *headerParser) offsets(e *entry) error {
	offs, err := p.uints("data_offsets")
	if err != nil {
		return err
	}
	if len(offs) != 2 {
		return fmt.Errorf("data_offsets has %d numbers, want [begin, end]", len(offs))
	}
	e.begin, e.end = offs[0], offs[1]
	return nil
}

// uints reads an array of non-negative integers that fit in 64 bits.
func (p *headerParser) uints(field string) ([]uint64, error) {
	if err := p.delim('['); err != nil {
		return nil, fmt.Errorf("%s is not an array: %w", field, err)
	}
	var out []uint64
	for p.dec.More() {
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s holds %s, not a non-negative integer", field, describe(tok))
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s holds %s, not a non-negative 64-bit integer", field, num)
		}
		out = append(out, v)
	}
	return out, p.delim(']')
}

// describe names a JSON token for an error message.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return strconv.Quote(v.String())
	case string:
		return "the string " + strconv.Quote(v)
	case json.Number:
		return "the number " + v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return "an unexpected token"
}
