package shardckpt

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// shardFormat names the layout of a shard file's metadata.
const shardFormat = "gorun-shard-1"

// The metadata keys of a shard file. "format" is "pt", which Hugging Face's
// transformers requires of a safetensors file it loads.
const (
	mdFormat      = "format"
	mdShardFormat = "shard_format"
	mdTag         = "tag"
	mdRank        = "rank"
	mdWorld       = "world_size"
	mdPieces      = "pieces"
)

// pieceRef describes one piece held by a shard file, in the file's
// "pieces" metadata.
type pieceRef struct {
	Key    string `json:"key"`
	Tensor string `json:"tensor"`
	Shape  []int  `json:"shape"`
	Lo     int    `json:"lo"`
	Hi     int    `json:"hi"`
}

// WriteShard writes one rank's pieces to dir, creating dir if need be, as
// the shard file of rank (from 0) of world for the save tagged tag, and
// returns the file's name, "shard-00002-of-00004.<tag>.safetensors" for
// rank 1 of 4. The file is written atomically (see safetensors.WriteFile),
// and nothing else in dir changes: the save becomes the checkpoint only when
// Commit is called.
//
// tag must be new to dir, such as the step number ("step-000100"); it may
// not be the committed checkpoint's, whose shards it would overwrite. A
// piece that is a whole tensor is stored under the tensor's name and shape,
// so that Python's safetensors reads it as usual; a part of one is stored
// as a 1-D tensor under "name[lo:hi]". Empty parts are left out. Pieces of
// the same tensor must agree on its shape and not overlap.
func WriteShard(dir, tag string, rank, world int, pieces []Piece) (string, error) {
	if err := checkTag(tag); err != nil {
		return "", fmt.Errorf("writing a shard to %s: %w", dir, err)
	}
	if world < 1 || rank < 0 || rank >= world {
		return "", fmt.Errorf("writing a shard to %s: rank %d is not in a world of %d", dir, rank, world)
	}
	name := shardName(tag, rank, world)
	path := filepath.Join(dir, name)
	if ix, err := Open(dir); err == nil && ix.tag == tag {
		return "", fmt.Errorf("%s: tag %q is the committed checkpoint's, whose shards this save would overwrite; give each save a new tag",
			path, tag)
	}
	tensors, refs, err := shardTensors(pieces)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	refJSON, err := json.Marshal(refs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	md := map[string]string{
		mdFormat:      "pt",
		mdShardFormat: shardFormat,
		mdTag:         tag,
		mdRank:        strconv.Itoa(rank),
		mdWorld:       strconv.Itoa(world),
		mdPieces:      string(refJSON),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := safetensors.WriteFile(path, tensors, md); err != nil {
		return "", err // names path
	}
	return name, nil
}

// shardTensors checks pieces and returns the tensors of a shard file that
// holds them, and their descriptions.
func shardTensors(pieces []Piece) ([]safetensors.Tensor, []pieceRef, error) {
	var (
		tensors []safetensors.Tensor
		refs    []pieceRef
	)
	for i := range pieces {
		p := &pieces[i]
		n, err := p.check()
		if err != nil {
			return nil, nil, err
		}
		ref := pieceRef{Key: p.Tensor, Tensor: p.Tensor, Shape: slices.Clone(p.Shape), Lo: p.Lo, Hi: p.Hi}
		if ref.Shape == nil {
			ref.Shape = []int{} // a scalar's shape is [], not null
		}
		shape := ref.Shape
		if p.Lo != 0 || p.Hi != n {
			if p.Lo == p.Hi {
				continue
			}
			ref.Key, shape = partKey(p.Tensor, p.Lo, p.Hi), []int{p.Hi - p.Lo}
		}
		tensors = append(tensors, safetensors.F32(ref.Key, shape, p.Data))
		refs = append(refs, ref)
	}
	return tensors, refs, checkRefs(refs)
}

// checkRefs checks that the pieces of each tensor in refs agree on its
// shape and do not overlap.
func checkRefs(refs []pieceRef) error {
	sorted := slices.Clone(refs)
	slices.SortFunc(sorted, func(a, b pieceRef) int {
		return cmp.Or(cmp.Compare(a.Tensor, b.Tensor), cmp.Compare(a.Lo, b.Lo), cmp.Compare(a.Hi, b.Hi))
	})
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1], sorted[i]
		switch {
		case a.Tensor != b.Tensor:
		case !slices.Equal(a.Shape, b.Shape):
			return fmt.Errorf("tensor %q has shape %v in piece %s and %v in piece %s",
				a.Tensor, a.Shape, a.Key, b.Shape, b.Key)
		case b.Lo < a.Hi || (a.Lo == a.Hi && b.Lo == b.Hi):
			return fmt.Errorf("pieces %s and %s of tensor %q overlap", a.Key, b.Key, a.Tensor)
		}
	}
	return nil
}

// shard is what Commit learns of a shard file.
type shard struct {
	name   string
	size   int64
	sha256 string
	pieces []pieceRef
}

// readShard reads the shard file called name in dir, which should be
// rank's of world for the save tagged tag; it checksums the file and
// checks its header against its metadata. Errors for the file's content
// wrap ErrCorrupt.
func readShard(dir, name, tag string, rank, world int) (*shard, error) {
	path := filepath.Join(dir, name)
	h, err := readHeader(path)
	if err != nil {
		return nil, err
	}
	refs, err := h.pieces(tag, rank, world)
	if err == nil {
		err = h.checkPieces(refs)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrCorrupt, err)
	}
	return &shard{name: name, size: h.size, sha256: h.sha256, pieces: refs}, nil
}

// pieces returns the pieces that the header's metadata lists, after
// checking that the file is rank's of world for the save tagged tag.
func (h *header) pieces(tag string, rank, world int) ([]pieceRef, error) {
	md := h.metadata
	switch {
	case md[mdShardFormat] != shardFormat:
		return nil, fmt.Errorf("metadata %s is %q, want %q", mdShardFormat, md[mdShardFormat], shardFormat)
	case md[mdTag] != tag || md[mdRank] != strconv.Itoa(rank) || md[mdWorld] != strconv.Itoa(world):
		return nil, fmt.Errorf("metadata says tag %q, rank %q of %q; its name says tag %q, rank %d of %d",
			md[mdTag], md[mdRank], md[mdWorld], tag, rank, world)
	}
	var refs []pieceRef
	if err := json.Unmarshal([]byte(md[mdPieces]), &refs); err != nil {
		return nil, fmt.Errorf("metadata %s: %w", mdPieces, err)
	}
	return refs, nil
}

// checkPieces checks that the header holds exactly the pieces refs, each
// an F32 tensor of its range's size.
func (h *header) checkPieces(refs []pieceRef) error {
	if len(refs) != len(h.entries) {
		return fmt.Errorf("metadata lists %d pieces, the header %d tensors", len(refs), len(h.entries))
	}
	for _, r := range refs {
		n, ok := numel(r.Shape)
		whole := r.Lo == 0 && r.Hi == n
		switch {
		case r.Tensor == "" || !ok || r.Lo < 0 || r.Lo > r.Hi || r.Hi > n || (r.Lo == r.Hi && !whole):
			return fmt.Errorf("metadata lists piece %q of tensor %q, range [%d, %d) of shape %v, which is not a piece",
				r.Key, r.Tensor, r.Lo, r.Hi, r.Shape)
		case whole && r.Key != r.Tensor, !whole && r.Key != partKey(r.Tensor, r.Lo, r.Hi):
			return fmt.Errorf("metadata lists tensor %q, range [%d, %d) under key %q", r.Tensor, r.Lo, r.Hi, r.Key)
		}
		shape := r.Shape
		if !whole {
			shape = []int{r.Hi - r.Lo}
		}
		e, ok := h.entries[r.Key]
		switch {
		case !ok:
			return fmt.Errorf("metadata lists piece %q, which the header lacks", r.Key)
		case e.DType != safetensors.Float32.String() || !slices.Equal(e.Shape, shape) ||
			e.Offsets[1]-e.Offsets[0] != 4*int64(r.Hi-r.Lo):
			return fmt.Errorf("piece %q is %s %v of bytes %v, want F32 %v", r.Key, e.DType, e.Shape, e.Offsets, shape)
		}
	}
	return checkRefs(refs)
}
