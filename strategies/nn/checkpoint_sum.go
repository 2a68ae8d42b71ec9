package nn

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"slices"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// ErrCorrupt is wrapped by the errors for a checkpoint file that is not
// what was saved: cut short, not a safetensors file, or content whose
// sha256 differs from the one saved with it. Such a file cannot be
// trusted; resume from another.
var ErrCorrupt = errors.New("corrupt checkpoint file")

// sumKey is the metadata key of a checkpoint's checksum (see contentSum).
const sumKey = "sha256"

// contentSum is the lowercase hex sha256 of what a checkpoint file holds:
// its metadata but sumKey, in key order, then each tensor in the order of
// its data, its name, dtype, shape and data. Every field is prefixed with
// its length, so that no two contents hash alike by moving a boundary.
// Only the header's layout (spacing, offsets, key order) is left out,
// which Decode checks on its own.
func contentSum(meta map[string]string, tensors []safetensors.Tensor) string {
	h := sha256.New()
	keys := make([]string, 0, len(meta))
	for k := range meta {
		if k != sumKey {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	putInt(h, len(keys))
	for _, k := range keys {
		putBytes(h, []byte(k))
		putBytes(h, []byte(meta[k]))
	}
	putInt(h, len(tensors))
	for _, t := range tensors {
		putBytes(h, []byte(t.Name))
		putBytes(h, []byte(t.DType.String()))
		putInt(h, len(t.Shape))
		for _, d := range t.Shape {
			putInt(h, d)
		}
		putBytes(h, t.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func putInt(h hash.Hash, n int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

func putBytes(h hash.Hash, b []byte) {
	putInt(h, len(b))
	h.Write(b)
}
