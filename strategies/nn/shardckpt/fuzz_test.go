package shardckpt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen opens arbitrary index bytes beside the shard files of a real
// save and reads from whatever Open accepts. Nothing may panic; every error
// of Open must wrap ErrCorrupt, and every piece that Read returns must be
// whole.
func FuzzOpen(f *testing.F) {
	src := f.TempDir()
	save(f, src, "s", 3, testTensors(1), true)
	index, err := os.ReadFile(filepath.Join(src, IndexFile))
	if err != nil {
		f.Fatal(err)
	}
	shards := shardFiles(f, src)
	f.Add(index)
	f.Add(index[:len(index)/2])
	f.Add([]byte("{}"))
	f.Add([]byte(`{"metadata":{"format":"gorun-sharded-1","world_size":"1","total_size":"8"},` +
		`"weight_map":{"a":"f"},"shapes":{"a":[2]},"pieces":{"a":[{"file":"f","key":"a","lo":0,"hi":2}]},` +
		`"files":{"f":{"size":0,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}}}`))
	f.Add([]byte(`{"metadata":{"format":"gorun-sharded-1","world_size":"1","total_size":"0"},` +
		`"weight_map":{},"shapes":{},"pieces":{},"files":{"..":{"size":0,"sha256":""}}}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		for _, name := range shards {
			if err := os.Symlink(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, IndexFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, err := Open(dir)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, which does not wrap ErrCorrupt", err)
			}
			return
		}
		for _, name := range ix.Tensors() {
			shape, ok := ix.Shape(name)
			if !ok {
				t.Fatalf("Tensors() lists %q, Shape does not know it", name)
			}
			n, _ := numel(shape)
			k := min(n, 64)
			for _, r := range [][2]int{{0, k}, {n - k, n}, {n / 2, n/2 + min(n-n/2, 3)}} {
				p := Piece{Tensor: name, Shape: shape, Lo: r[0], Hi: r[1]}
				if err := ix.Read(&p); err == nil && len(p.Data) != p.Hi-p.Lo {
					t.Fatalf("Read(%s) returned %d values", &p, len(p.Data))
				}
			}
		}
	})
}
