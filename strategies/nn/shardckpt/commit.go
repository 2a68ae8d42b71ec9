package shardckpt

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Commit makes the save tagged tag the checkpoint of dir. It reads the
// header of each of the save's world shard files, checksums them, checks
// that their pieces tile every tensor exactly (no overlaps, no gaps) and
// writes the index, IndexFile, atomically: a temporary file, synced, renamed
// over the old index, and the directory synced. Only then does it remove
// the files that the new index does not name: the shards of older saves and
// of saves never committed, and the temporary files of interrupted writes.
// Other files in dir are left alone.
//
// One process calls Commit, after every rank's WriteShard for tag has
// returned, and no rank may begin its next WriteShard to dir before Commit
// returns, lest Commit remove that save's files. meta is stored in the
// index's metadata beside the keys Commit writes itself ("format",
// "world_size", "total_size"), which meta may not hold.
//
// If the removal of old files fails, the new checkpoint is committed all
// the same; the error says so, and the next Commit removes them.
func Commit(dir, tag string, world int, meta map[string]string) error {
	return commit(dir, tag, world, meta, writeAtomic)
}

// commit is Commit, writing the index with write, so that tests can crash
// it before or after the index is in place.
func commit(dir, tag string, world int, meta map[string]string, write func(path string, data []byte) error) error {
	if err := checkTag(tag); err != nil {
		return fmt.Errorf("committing to %s: %w", dir, err)
	}
	if world < 1 {
		return fmt.Errorf("committing %q to %s: world size %d is not positive", tag, dir, world)
	}
	for _, k := range []string{mdFormat, mdWorld, mdTotal} {
		if _, ok := meta[k]; ok {
			return fmt.Errorf("committing %q to %s: metadata key %q is Commit's own", tag, dir, k)
		}
	}
	shards, err := readShards(dir, tag, world)
	if err != nil {
		return fmt.Errorf("committing %q to %s: %w", tag, dir, err)
	}
	ix, err := buildIndex(shards, world, meta)
	if err != nil {
		return fmt.Errorf("committing %q to %s: %w", tag, dir, err)
	}
	data, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return fmt.Errorf("committing %q to %s: %w", tag, dir, err)
	}
	if err := write(filepath.Join(dir, IndexFile), append(data, '\n')); err != nil {
		return fmt.Errorf("committing %q: %w", tag, err)
	}
	if err := clean(dir, ix.Files); err != nil {
		return fmt.Errorf("committed %q to %s, but removing stale files failed (the next Commit retries): %w",
			tag, dir, err)
	}
	return nil
}

// readShards finds and reads the world shard files of the save tagged tag
// in dir, in rank order.
func readShards(dir, tag string, world int) ([]*shard, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var found int
	for _, e := range ents {
		_, w, t, ok := parseShardName(e.Name())
		if !ok || t != tag {
			continue
		}
		if w != world {
			return nil, fmt.Errorf("shard file %s is of a save at world size %d, not %d", e.Name(), w, world)
		}
		found++
	}
	if found != world {
		var lack []string
		for r := range world {
			if _, err := os.Stat(filepath.Join(dir, shardName(tag, r, world))); err != nil {
				lack = append(lack, shardName(tag, r, world))
			}
		}
		return nil, fmt.Errorf("found %d of the save's %d shard files; missing %s", found, world, strings.Join(lack, ", "))
	}
	shards := make([]*shard, world)
	for r := range world {
		if shards[r], err = readShard(dir, shardName(tag, r, world), tag, r, world); err != nil {
			return nil, err
		}
	}
	return shards, nil
}

// buildIndex merges the pieces of shards into an index, checking that
// the pieces of each tensor agree on its shape and tile it exactly.
func buildIndex(shards []*shard, world int, meta map[string]string) (*indexJSON, error) {
	ix := &indexJSON{
		Metadata:  maps.Clone(meta),
		WeightMap: map[string]string{},
		Shapes:    map[string][]int{},
		Pieces:    map[string][]pieceJSON{},
		Files:     map[string]fileJSON{},
	}
	shapeFile := map[string]string{} // the first file that gave each tensor's shape
	for _, s := range shards {
		ix.Files[s.name] = fileJSON{Size: s.size, SHA256: s.sha256}
		for _, r := range s.pieces {
			if shape, ok := ix.Shapes[r.Tensor]; !ok {
				ix.Shapes[r.Tensor], shapeFile[r.Tensor] = r.Shape, s.name
			} else if !slices.Equal(shape, r.Shape) {
				return nil, fmt.Errorf("tensor %q has shape %v in %s and %v in %s",
					r.Tensor, shape, shapeFile[r.Tensor], r.Shape, s.name)
			}
			ix.Pieces[r.Tensor] = append(ix.Pieces[r.Tensor], pieceJSON{File: s.name, Key: r.Key, Lo: r.Lo, Hi: r.Hi})
		}
	}
	var total int64
	for _, t := range slices.Sorted(maps.Keys(ix.Pieces)) {
		n, _ := numel(ix.Shapes[t]) // readShard checked it
		ps, err := tile(t, n, ix.Pieces[t])
		if err != nil {
			return nil, err
		}
		ix.Pieces[t], ix.WeightMap[t] = ps, ps[0].File
		total += 4 * int64(n)
	}
	if ix.Metadata == nil {
		ix.Metadata = map[string]string{}
	}
	ix.Metadata[mdFormat] = indexFormat
	ix.Metadata[mdWorld] = strconv.Itoa(world)
	ix.Metadata[mdTotal] = strconv.FormatInt(total, 10)
	return ix, nil
}

// tile sorts the pieces of tensor t, of n elements, and checks that they
// cover [0, n) without overlapping. A tensor of no elements, stored whole
// by several ranks, keeps one piece.
func tile(t string, n int, ps []pieceJSON) ([]pieceJSON, error) {
	slices.SortFunc(ps, func(a, b pieceJSON) int {
		return cmp.Or(cmp.Compare(a.Lo, b.Lo), cmp.Compare(a.Hi, b.Hi), cmp.Compare(a.File, b.File))
	})
	if n == 0 {
		return ps[:1], nil
	}
	pos := 0
	for i, p := range ps {
		switch {
		case p.Lo < pos:
			q := ps[i-1]
			return nil, fmt.Errorf("tensor %q: elements [%d, %d) in %s overlap [%d, %d) in %s",
				t, p.Lo, p.Hi, p.File, q.Lo, q.Hi, q.File)
		case p.Lo > pos:
			return nil, fmt.Errorf("tensor %q: elements [%d, %d) of %d are in no shard file", t, pos, p.Lo, n)
		}
		pos = p.Hi
	}
	if pos < n {
		return nil, fmt.Errorf("tensor %q: elements [%d, %d) of %d are in no shard file", t, pos, n, n)
	}
	return ps, nil
}

// writeAtomic writes data to path through a temporary file in the same
// directory, synced and renamed over path, and syncs the directory, so that
// path holds either its old content or data, even across a crash.
func writeAtomic(path string, data []byte) error {
	dir, base := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+base+tmpInfix+"*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := syncDir(cmp.Or(dir, ".")); err != nil {
		return fmt.Errorf("%s: written, but syncing its directory failed: %w", path, err)
	}
	return nil
}

// tmpInfix is in the name of every temporary file that this package and
// safetensors.WriteFile make: ".<name>.tmp-<random>".
const tmpInfix = ".tmp-"

// clean removes from dir every shard file that keep does not name and every
// temporary file of a shard or an index.
func clean(dir string, keep map[string]fileJSON) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		_, _, _, isShard := parseShardName(name)
		isTemp := strings.Contains(name, tmpInfix) &&
			(strings.HasPrefix(name, "."+shardPrefix) || strings.HasPrefix(name, "."+IndexFile+tmpInfix))
		if _, kept := keep[name]; kept || e.IsDir() || !(isShard || isTemp) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncDir syncs the directory dir, so that a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
