package shardckpt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// Read fills p.Data with the elements [p.Lo, p.Hi) of tensor p.Tensor,
// from whichever shard files hold them; a nil p.Data is allocated, any
// other must hold Hi-Lo values. p.Shape must be the tensor's shape in the
// checkpoint (see Shape).
//
// Read reads a shard file the first time it needs it, checks its size and
// SHA-256 against the index, decodes it and keeps it in memory for later
// calls. A shard file that is missing is an error that names it and wraps
// fs.ErrNotExist; one whose size or checksum differs, or that does not
// decode or lacks a piece the index puts there, an error that names it and
// wraps ErrCorrupt. Elements that no shard file holds are an error that
// names the tensor and the range.
func (ix *Index) Read(p *Piece) error {
	t, err := ix.lookup(p)
	if err != nil {
		return err
	}
	if p.Data == nil {
		p.Data = make([]float32, p.Hi-p.Lo)
	}
	if len(p.Data) != p.Hi-p.Lo {
		return fmt.Errorf("reading %s from %s: %d values of room for %d elements", p, ix.dir, len(p.Data), p.Hi-p.Lo)
	}
	i := sort.Search(len(t.pieces), func(i int) bool { return t.pieces[i].Hi > p.Lo })
	for pos := p.Lo; pos < p.Hi; i++ {
		if i == len(t.pieces) || t.pieces[i].Lo > pos {
			end := p.Hi
			if i < len(t.pieces) {
				end = min(end, t.pieces[i].Lo)
			}
			return fmt.Errorf("reading %s from %s: elements [%d, %d) of tensor %q are in no shard file",
				p, ix.dir, pos, end, p.Tensor)
		}
		pc := t.pieces[i]
		end := min(p.Hi, pc.Hi)
		if err := ix.copyPiece(pc, pos, end, p.Data[pos-p.Lo:end-p.Lo]); err != nil {
			return err
		}
		pos = end
	}
	return nil
}

// lookup finds the tensor that p asks for and checks p's shape and range.
func (ix *Index) lookup(p *Piece) (*tensor, error) {
	t, ok := ix.tensors[p.Tensor]
	switch {
	case !ok:
		return nil, fmt.Errorf("reading %s from %s: the checkpoint has no tensor %q", p, ix.dir, p.Tensor)
	case !slices.Equal(p.Shape, t.shape):
		return nil, fmt.Errorf("reading %s from %s: tensor %q has shape %v in the checkpoint, not %v",
			p, ix.dir, p.Tensor, t.shape, p.Shape)
	case p.Lo < 0 || p.Lo > p.Hi || p.Hi > t.n:
		return nil, fmt.Errorf("reading %s from %s: range [%d, %d) is not within the %d elements of tensor %q",
			p, ix.dir, p.Lo, p.Hi, t.n, p.Tensor)
	}
	return t, nil
}

// copyPiece decodes elements [lo, hi) of the tensor, which piece pc holds,
// into dst.
func (ix *Index) copyPiece(pc pieceJSON, lo, hi int, dst []float32) error {
	f, err := ix.file(pc.File)
	if err != nil {
		return err
	}
	path := filepath.Join(ix.dir, pc.File)
	st, ok := f.Tensor(pc.Key)
	switch {
	case !ok:
		return fmt.Errorf("%s: %w: no tensor %q, which the index %s puts there", path, ErrCorrupt, pc.Key, ix.path)
	case st.DType != safetensors.Float32 || len(st.Data) != 4*(pc.Hi-pc.Lo):
		return fmt.Errorf("%s: %w: tensor %q is %v of %d bytes, the index %s wants F32 of %d elements",
			path, ErrCorrupt, pc.Key, st.DType, len(st.Data), ix.path, pc.Hi-pc.Lo)
	}
	part := safetensors.Tensor{Name: pc.Key, DType: safetensors.Float32, Data: st.Data[4*(lo-pc.Lo) : 4*(hi-pc.Lo)]}
	return part.Float32sInto(dst)
}

// file returns the shard file called name, reading and verifying it the
// first time.
func (ix *Index) file(name string) (*safetensors.File, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if f, ok := ix.loaded[name]; ok {
		return f, nil
	}
	path := filepath.Join(ix.dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading shard file %s of %s: %w", name, ix.path, err)
	}
	want := ix.files[name]
	if int64(len(data)) != want.Size {
		return nil, fmt.Errorf("%s: %w: %d bytes, the index %s says %d", path, ErrCorrupt, len(data), ix.path, want.Size)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want.SHA256 {
		return nil, fmt.Errorf("%s: %w: sha256 %x, the index %s says %s", path, ErrCorrupt, sum, ix.path, want.SHA256)
	}
	f, err := safetensors.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrCorrupt, err)
	}
	ix.loaded[name] = f
	return f, nil
}
