package safetensors

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor. Its String is the code written in
// the header ("F32", "BF16", ...). The zero DType is invalid, so that a
// Tensor left without one is rejected rather than written.
type DType uint8

// The dtypes of the safetensors format that this package supports, in the
// reference implementation's order of increasing alignment.
const (
	// Bool is BOOL: one byte per element, 0 or 1.
	Bool DType = iota + 1
	// Uint8 is U8.
	Uint8
	// Int8 is I8.
	Int8
	// Int16 is I16.
	Int16
	// Uint16 is U16.
	Uint16
	// Float16 is F16, IEEE 754 half precision.
	Float16
	// BFloat16 is BF16, the upper half of an IEEE 754 single.
	BFloat16
	// Int32 is I32.
	Int32
	// Uint32 is U32.
	Uint32
	// Float32 is F32, IEEE 754 single precision.
	Float32
	// Float64 is F64, IEEE 754 double precision.
	Float64
	// Int64 is I64.
	Int64
	// Uint64 is U64.
	Uint64

	numDTypes = int(Uint64) + 1
)

// dtypeInfo is the header code and element size of each DType, indexed by
// the DType.
var dtypeInfo = [numDTypes]struct {
	code string
	size int
}{
	Bool:     {"BOOL", 1},
	Uint8:    {"U8", 1},
	Int8:     {"I8", 1},
	Int16:    {"I16", 2},
	Uint16:   {"U16", 2},
	Float16:  {"F16", 2},
	BFloat16: {"BF16", 2},
	Int32:    {"I32", 4},
	Uint32:   {"U32", 4},
	Float32:  {"F32", 4},
	Float64:  {"F64", 8},
	Int64:    {"I64", 8},
	Uint64:   {"U64", 8},
}

// DTypes returns every supported DType, in the reference implementation's
// order of increasing alignment.
func DTypes() []DType {
	out := make([]DType, 0, numDTypes-1)
	for d := Bool; int(d) < numDTypes; d++ {
		out = append(out, d)
	}
	return out
}

// Valid reports whether d is one of the supported dtypes.
func (d DType) Valid() bool {
	return d >= Bool && int(d) < numDTypes
}

// Size returns the size of one element in bytes, or 0 for an invalid DType.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns the header code of d ("F32"), or "DType(n)" for an invalid
// DType.
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return dtypeInfo[d].code
}

// parseDType returns the DType whose header code is s.
func parseDType(s string) (DType, bool) {
	for d := Bool; int(d) < numDTypes; d++ {
		if dtypeInfo[d].code == s {
			return d, true
		}
	}
	return 0, false
}

// supportedCodes lists the header codes for error messages.
func supportedCodes() string {
	codes := make([]string, 0, numDTypes-1)
	for _, d := range DTypes() {
		codes = append(codes, d.String())
	}
	return strings.Join(codes, ", ")
}
