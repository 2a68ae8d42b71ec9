package safetensors

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// ErrInvalid is wrapped by every error for a tensor that cannot be written
// (a bad name, dtype, shape or data length) or read as asked (Float32s of a
// tensor that is not F32).
var ErrInvalid = errors.New("invalid tensor")

// metadataKey is the header key of the metadata object; no tensor may use it.
const metadataKey = "__metadata__"

// Tensor is one named tensor: its dtype, shape and raw data, little-endian
// and row-major. The tensors of a File returned by Decode share their Data
// with the decoded buffer.
type Tensor struct {
	// Name is the tensor's key in the header, such as "fc1.weight".
	Name string
	// DType is the element type.
	DType DType
	// Shape is the size of each dimension; an empty Shape is a scalar.
	Shape []int
	// Data holds product(Shape) * DType.Size() bytes.
	Data []byte
}

// F32 returns an F32 tensor holding a little-endian copy of v. It does not
// check that len(v) matches shape; Encode does.
func F32(name string, shape []int, v []float32) Tensor {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
	}
	return Tensor{Name: name, DType: Float32, Shape: slices.Clone(shape), Data: data}
}

// Float32s returns the values of an F32 tensor in a new slice. It fails,
// wrapping ErrInvalid, for any other dtype or for data whose length is not a
// multiple of 4.
func (t Tensor) Float32s() ([]float32, error) {
	if err := t.checkF32(); err != nil {
		return nil, err
	}
	out := make([]float32, len(t.Data)/4)
	return out, t.Float32sInto(out)
}

// Float32sInto decodes the values of an F32 tensor into dst without
// allocating. dst must hold exactly the tensor's number of elements; other
// lengths and other dtypes fail, wrapping ErrInvalid.
func (t Tensor) Float32sInto(dst []float32) error {
	if err := t.checkF32(); err != nil {
		return err
	}
	if n := len(t.Data) / 4; len(dst) != n {
		return fmt.Errorf("%w: tensor %q holds %d values, destination has room for %d",
			ErrInvalid, t.Name, n, len(dst))
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return nil
}

// checkF32 checks that t can be read as float32 values.
func (t Tensor) checkF32() error {
	if t.DType != Float32 {
		return fmt.Errorf("%w: tensor %q is %v, not F32", ErrInvalid, t.Name, t.DType)
	}
	if len(t.Data)%4 != 0 {
		return fmt.Errorf("%w: tensor %q: %d bytes of data is not a whole number of F32 values",
			ErrInvalid, t.Name, len(t.Data))
	}
	return nil
}

// Sort orders tensors as the reference writer lays them out: by decreasing
// dtype alignment (U64, I64, F64, F32, ..., BOOL), then by name. Encoding
// the sorted tensors reproduces the reference writer's file byte for byte.
func Sort(tensors []Tensor) {
	slices.SortStableFunc(tensors, func(a, b Tensor) int {
		if c := cmp.Compare(b.DType, a.DType); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// dataSize returns the number of bytes that a tensor of the given shape and
// dtype holds, and false if a dimension is negative or the size overflows.
// Like the reference, it multiplies left to right and reports overflow even
// where a later dimension is zero.
func dataSize(shape []int, d DType) (int, bool) {
	n := uint64(1)
	for _, dim := range shape {
		if dim < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(dim))
		if hi != 0 || lo > math.MaxInt {
			return 0, false
		}
		n = lo
	}
	hi, lo := bits.Mul64(n, uint64(d.Size()))
	if hi != 0 || lo > math.MaxInt {
		return 0, false
	}
	return int(lo), true
}

// check validates a tensor that is about to be written; seen holds the names
// of the tensors before it and gains this one.
func (t Tensor) check(seen map[string]bool) error {
	switch {
	case !utf8.ValidString(t.Name):
		return fmt.Errorf("%w: tensor name %q is not valid UTF-8", ErrInvalid, t.Name)
	case t.Name == metadataKey:
		return fmt.Errorf("%w: %q is reserved for the metadata and cannot name a tensor", ErrInvalid, t.Name)
	case seen[t.Name]:
		return fmt.Errorf("%w: tensor %q appears twice", ErrInvalid, t.Name)
	case !t.DType.Valid():
		return fmt.Errorf("%w: tensor %q has unsupported dtype %v (supported: %s)",
			ErrInvalid, t.Name, t.DType, supportedCodes())
	}
	seen[t.Name] = true
	need, ok := dataSize(t.Shape, t.DType)
	if !ok {
		return fmt.Errorf("%w: tensor %q: shape %v of %v is negative or too large",
			ErrInvalid, t.Name, t.Shape, t.DType)
	}
	if len(t.Data) != need {
		return fmt.Errorf("%w: tensor %q holds %d bytes, shape %v of %v needs %d",
			ErrInvalid, t.Name, len(t.Data), t.Shape, t.DType, need)
	}
	return nil
}
