package shardckpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// IndexFile is the name of a checkpoint's index in its directory, the name
// Hugging Face gives the index of a sharded safetensors checkpoint.
const IndexFile = "model.safetensors.index.json"

// indexFormat is the index's metadata "format"; Open refuses another.
const indexFormat = "gorun-sharded-1"

// mdTotal is the index's metadata key for the tensors' size in bytes.
const mdTotal = "total_size"

// ErrCorrupt is wrapped by every error for a checkpoint file whose content
// is not what it should be: an index that is malformed or inconsistent, a
// shard file whose size or checksum differs from the index's, or one that
// does not decode. Such a checkpoint cannot be trusted; load an older one.
var ErrCorrupt = errors.New("corrupt checkpoint file")

// indexJSON is the index file's JSON.
type indexJSON struct {
	Metadata  map[string]string      `json:"metadata"`
	WeightMap map[string]string      `json:"weight_map"`
	Shapes    map[string][]int       `json:"shapes"`
	Pieces    map[string][]pieceJSON `json:"pieces"`
	Files     map[string]fileJSON    `json:"files"`
}

// pieceJSON is one piece of a tensor in the index: elements [Lo, Hi),
// stored in File under Key.
type pieceJSON struct {
	File string `json:"file"`
	Key  string `json:"key"`
	Lo   int    `json:"lo"`
	Hi   int    `json:"hi"`
}

// fileJSON is a shard file's size in bytes and SHA-256 in lowercase hex.
type fileJSON struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Index is an opened checkpoint: its index, and the shard files read so far.
// An Index is safe for concurrent use.
type Index struct {
	dir, path string
	meta      map[string]string
	world     int
	tag       string // the save's tag, from the shard files' names; "" if they do not say
	tensors   map[string]*tensor
	names     []string // the tensors' names, sorted
	files     map[string]fileJSON

	mu     sync.Mutex                   // protects following
	loaded map[string]*safetensors.File // shard files read and verified, by name
}

// tensor is one tensor of the index.
type tensor struct {
	shape  []int
	n      int
	pieces []pieceJSON // sorted by Lo, disjoint
}

// Open reads the index of the checkpoint in dir. A missing index is an
// error that wraps fs.ErrNotExist; a malformed or inconsistent one, an
// error that names the file, says what is wrong and wraps ErrCorrupt.
// Open reads no shard file: Read reads each when it first needs it.
func Open(dir string) (*Index, error) {
	path := filepath.Join(dir, IndexFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("opening the checkpoint in %s: %w", dir, err) // an *fs.PathError names path
	}
	var raw indexJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%s: %w: empty or truncated (%d bytes)", path, ErrCorrupt, len(data))
		}
		return nil, fmt.Errorf("%s: %w: not the JSON of an index: %w", path, ErrCorrupt, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w: more follows the index's JSON object", path, ErrCorrupt)
	}
	ix := &Index{dir: dir, path: path, files: raw.Files, loaded: map[string]*safetensors.File{}}
	if err := ix.load(&raw); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrCorrupt, err)
	}
	return ix, nil
}

// load checks raw and fills ix from it.
func (ix *Index) load(raw *indexJSON) error {
	if err := ix.loadMetadata(raw.Metadata); err != nil {
		return err
	}
	if err := ix.loadFiles(); err != nil {
		return err
	}
	ix.tensors = make(map[string]*tensor, len(raw.Shapes))
	var total int64
	for name, shape := range raw.Shapes {
		n, ok := numel(shape)
		if !ok {
			return fmt.Errorf("shapes: tensor %q has shape %v, negative or too large", name, shape)
		}
		ps, ok := raw.Pieces[name]
		if !ok {
			return fmt.Errorf("tensor %q has a shape but no pieces", name)
		}
		if err := ix.checkPieces(name, n, ps); err != nil {
			return err
		}
		if f, ok := raw.WeightMap[name]; !ok || !ix.hasFile(f) {
			return fmt.Errorf("weight_map: tensor %q maps to %q, which is not a shard file of the index", name, f)
		}
		ix.tensors[name] = &tensor{shape: shape, n: n, pieces: ps}
		total += 4 * int64(n)
	}
	switch {
	case len(raw.Pieces) != len(raw.Shapes):
		return fmt.Errorf("pieces lists %d tensors, shapes %d", len(raw.Pieces), len(raw.Shapes))
	case len(raw.WeightMap) != len(raw.Shapes):
		return fmt.Errorf("weight_map lists %d tensors, shapes %d", len(raw.WeightMap), len(raw.Shapes))
	case ix.meta[mdTotal] != strconv.FormatInt(total, 10):
		return fmt.Errorf("metadata %s is %q, the shapes add up to %d bytes", mdTotal, ix.meta[mdTotal], total)
	}
	ix.names = slices.Sorted(maps.Keys(ix.tensors))
	return nil
}

// loadMetadata checks the index's metadata and fills ix.meta and ix.world.
func (ix *Index) loadMetadata(md map[string]string) error {
	if md[mdFormat] != indexFormat {
		return fmt.Errorf("metadata %s is %q, want %q", mdFormat, md[mdFormat], indexFormat)
	}
	w, err := strconv.Atoi(md[mdWorld])
	if err != nil || w < 1 {
		return fmt.Errorf("metadata %s is %q, not a positive integer", mdWorld, md[mdWorld])
	}
	ix.meta, ix.world = md, w
	return nil
}

// loadFiles checks the index's list of shard files and finds the save's tag.
func (ix *Index) loadFiles() error {
	if len(ix.files) != ix.world {
		return fmt.Errorf("files lists %d shard files for a world of %d", len(ix.files), ix.world)
	}
	for _, name := range slices.Sorted(maps.Keys(ix.files)) {
		f := ix.files[name]
		if !filepath.IsLocal(name) || filepath.Base(name) != name {
			return fmt.Errorf("files: %q is not the name of a file in the checkpoint's directory", name)
		}
		if f.Size < 0 || !isSHA256(f.SHA256) {
			return fmt.Errorf("files: %q has size %d and sha256 %q", name, f.Size, f.SHA256)
		}
		if _, _, tag, ok := parseShardName(name); ok && (ix.tag == "" || ix.tag == tag) {
			ix.tag = tag
		}
	}
	return nil
}

// checkPieces checks the pieces of tensor name, of n elements: each a
// range within it, in a listed file, sorted by Lo and disjoint.
func (ix *Index) checkPieces(name string, n int, ps []pieceJSON) error {
	pos := 0
	for _, p := range ps {
		switch {
		case !ix.hasFile(p.File):
			return fmt.Errorf("pieces: tensor %q has a piece in %q, which files does not list", name, p.File)
		case p.Key == "":
			return fmt.Errorf("pieces: tensor %q has a piece with no key", name)
		case p.Lo < pos:
			return fmt.Errorf("pieces: tensor %q has piece [%d, %d) after one that ends at %d: they overlap or are out of order",
				name, p.Lo, p.Hi, pos)
		case p.Hi < p.Lo || p.Hi > n:
			return fmt.Errorf("pieces: tensor %q has piece [%d, %d), which is not a range of its %d elements",
				name, p.Lo, p.Hi, n)
		}
		pos = p.Hi
	}
	return nil
}

// hasFile reports whether the index lists the shard file called name.
func (ix *Index) hasFile(name string) bool {
	_, ok := ix.files[name]
	return ok
}

// isSHA256 reports whether s is a SHA-256 in lowercase hex.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Meta returns a copy of the index's metadata: the caller's, given to
// Commit, and "format", "world_size" and "total_size".
func (ix *Index) Meta() map[string]string { return maps.Clone(ix.meta) }

// World returns the world size of the save.
func (ix *Index) World() int { return ix.world }

// Shape returns the shape of tensor and whether the checkpoint holds it.
func (ix *Index) Shape(tensor string) ([]int, bool) {
	t, ok := ix.tensors[tensor]
	if !ok {
		return nil, false
	}
	return slices.Clone(t.shape), true
}

// Tensors returns the names of the checkpoint's tensors, sorted.
func (ix *Index) Tensors() []string { return slices.Clone(ix.names) }
