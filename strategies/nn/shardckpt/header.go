package shardckpt

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// header is what Commit reads of a shard file: the safetensors header's
// metadata and entries, and the whole file's size and checksum.
type header struct {
	metadata map[string]string
	entries  map[string]headerEntry
	size     int64
	sha256   string // lowercase hex
}

// headerEntry is one tensor's entry in a safetensors header.
type headerEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// readHeader reads the header of the safetensors file at path and
// checksums the whole file in the same pass, without holding its data in
// memory. It checks only that the entries' sizes add up to the data's:
// Read decodes the file in full, after checking its checksum. Errors for
// the file's content wrap ErrCorrupt.
func readHeader(path string) (*header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // an *fs.PathError, which names path
	}
	defer f.Close()
	sum := sha256.New()
	r := io.TeeReader(f, sum)
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, headerError(path, err)
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > safetensors.MaxHeaderSize {
		return nil, fmt.Errorf("%s: %w: header length %d is over the limit of %d bytes",
			path, ErrCorrupt, n, safetensors.MaxHeaderSize)
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, headerError(path, err)
	}
	rest, err := io.Copy(sum, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h := &header{size: 8 + int64(n) + rest, sha256: hex.EncodeToString(sum.Sum(nil))}
	if err := h.parse(raw, rest); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrCorrupt, err)
	}
	return h, nil
}

// headerError says why the header of the file at path could not be read.
func headerError(path string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: %w: truncated within the header", path, ErrCorrupt)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// parse decodes the JSON header raw of a file whose data takes dataSize
// bytes.
func (h *header) parse(raw []byte, dataSize int64) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("the header is not a JSON object: %w", err)
	}
	h.entries = make(map[string]headerEntry, len(fields))
	var total int64
	for name, v := range fields {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &h.metadata); err != nil {
				return fmt.Errorf("__metadata__: %w", err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		if e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > dataSize {
			return fmt.Errorf("tensor %q: data_offsets %v do not fit %d bytes of data", name, e.Offsets, dataSize)
		}
		total += e.Offsets[1] - e.Offsets[0]
		h.entries[name] = e
	}
	if total != dataSize {
		return fmt.Errorf("the tensors take %d bytes, the file holds %d bytes of data", total, dataSize)
	}
	return nil
}
