package shardckpt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// TestDamagedShard damages one shard file of a saved checkpoint; reading
// what it holds must fail, naming the file, and the rest must still load.
func TestDamagedShard(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(path string) error
		reindex bool // put the damaged file's size and checksum in the index
		is      error
		want    string // in the error
	}{
		{"deleted", os.Remove, false, fs.ErrNotExist, "no such file"},
		{"byte flipped in the data", func(path string) error { return flip(path, -1) }, false, ErrCorrupt, "sha256"},
		{"byte flipped in the header", func(path string) error { return flip(path, 20) }, false, ErrCorrupt, "sha256"},
		{"truncated", func(path string) error { return os.Truncate(path, 100) }, false, ErrCorrupt, "100 bytes, the index"},
		{"truncated, index to match", func(path string) error { return os.Truncate(path, 100) }, true, ErrCorrupt, "safetensors: truncated"},
		{"piece missing, index to match", func(path string) error {
			return safetensors.WriteFile(path, nil, map[string]string{"format": "pt"})
		}, true, ErrCorrupt, `no tensor "wte.weight[8:17]"`},
		{"grown", func(path string) error {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = f.Write([]byte{0})
			return errors.Join(err, f.Close())
		}, false, ErrCorrupt, "1105 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			specs := testTensors(1)
			save(t, dir, "s", 4, specs, false)
			bad := shardName("s", 1, 4)
			if err := tt.damage(filepath.Join(dir, bad)); err != nil {
				t.Fatal(err)
			}
			if tt.reindex {
				reindex(t, dir, bad)
			}
			ix, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := cut(specs, 0, 1, 4, false) // wte.weight's part in rank 1's file
			p := Piece{Tensor: specs[0].name, Shape: specs[0].shape, Lo: lo, Hi: hi}
			err = ix.Read(&p)
			if !errors.Is(err, tt.is) || !strings.Contains(fmtErr(err), bad) || !strings.Contains(fmtErr(err), tt.want) {
				t.Fatalf("Read(%s) = %v, want an error naming %s, saying %q, that wraps %v", &p, err, bad, tt.want, tt.is)
			}
			t.Log(err)
			lo, hi = cut(specs, 0, 2, 4, false)
			checkRange(t, ix, specs[0], lo, hi) // rank 2's file is whole
		})
	}
}

// reindex puts the size and checksum of the shard file name in dir's index.
func reindex(t *testing.T, dir, name string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	rewriteIndex(t, filepath.Join(dir, IndexFile), func(ix map[string]any, _ []byte) []byte {
		ix["files"].(map[string]any)[name] = fileJSON{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
		return nil
	})
}

// flip flips the bits of the byte at offset off of the file at path,
// counting from the end if off is negative.
func flip(path string, off int) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if off < 0 {
		off += len(data)
	}
	data[off] ^= 0xff
	return os.WriteFile(path, data, 0o644)
}

// fmtErr is err's text, or "" for nil.
func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDamagedIndex damages the index of a saved checkpoint; Open must fail
// with an error that names the index and says what is wrong.
func TestDamagedIndex(t *testing.T) {
	tests := []struct {
		name   string
		damage func(ix map[string]any, data []byte) []byte // returns the new index, or nil to write ix
		want   string                                      // in the error
	}{
		{"truncated", func(_ map[string]any, data []byte) []byte { return data[:len(data)/2] }, "truncated"},
		{"empty", func(map[string]any, []byte) []byte { return []byte{} }, "empty"},
		{"not JSON", func(map[string]any, []byte) []byte { return []byte("model.safetensors") }, "not the JSON"},
		{"trailing data", func(_ map[string]any, data []byte) []byte { return append(data, "{}"...) }, "more follows"},
		{"unknown field", func(ix map[string]any, _ []byte) []byte { ix["extra"] = 1; return nil }, "extra"},
		{"other format", func(ix map[string]any, _ []byte) []byte {
			meta(ix)["format"] = "gorun-sharded-2"
			return nil
		}, `format is "gorun-sharded-2"`},
		{"no metadata", func(ix map[string]any, _ []byte) []byte { delete(ix, "metadata"); return nil }, "format"},
		{"world size disagrees with files", func(ix map[string]any, _ []byte) []byte {
			meta(ix)["world_size"] = "3"
			return nil
		}, "for a world of 3"},
		{"total size wrong", func(ix map[string]any, _ []byte) []byte {
			meta(ix)["total_size"] = "1"
			return nil
		}, "total_size"},
		{"file outside the directory", func(ix map[string]any, _ []byte) []byte {
			files := ix["files"].(map[string]any)
			files["../x.safetensors"] = files[shardName("s", 0, 2)]
			delete(files, shardName("s", 0, 2))
			return nil
		}, "../x.safetensors"},
		{"bad checksum", func(ix map[string]any, _ []byte) []byte {
			ix["files"].(map[string]any)[shardName("s", 0, 2)].(map[string]any)["sha256"] = "abc"
			return nil
		}, `sha256 "abc"`},
		{"pieces overlap", func(ix map[string]any, _ []byte) []byte {
			p := ix["pieces"].(map[string]any)["wte.weight"].([]any)
			p[1].(map[string]any)["lo"] = 3
			return nil
		}, `tensor "wte.weight" has piece [3, 35) after one that ends at 17`},
		{"piece beyond the shape", func(ix map[string]any, _ []byte) []byte {
			p := ix["pieces"].(map[string]any)["wte.weight"].([]any)
			p[len(p)-1].(map[string]any)["hi"] = 36
			return nil
		}, `piece [17, 36)`},
		{"tensor without pieces", func(ix map[string]any, _ []byte) []byte {
			delete(ix["pieces"].(map[string]any), "scale")
			return nil
		}, `"scale" has a shape but no pieces`},
		{"negative dimension", func(ix map[string]any, _ []byte) []byte {
			ix["shapes"].(map[string]any)["wte.weight"] = []int{-7, -5}
			return nil
		}, "[-7 -5]"},
		{"weight_map names an unknown file", func(ix map[string]any, _ []byte) []byte {
			ix["weight_map"].(map[string]any)["scale"] = "model.safetensors"
			return nil
		}, "weight_map"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			save(t, dir, "s", 2, testTensors(1), false)
			path := filepath.Join(dir, IndexFile)
			rewriteIndex(t, path, tt.damage)
			_, err := Open(dir)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(fmtErr(err), path) ||
				!strings.Contains(fmtErr(err), tt.want) {
				t.Fatalf("Open = %v, want an error naming %s, saying %q, that wraps ErrCorrupt", err, path, tt.want)
			}
			t.Log(err)
		})
	}
}

// meta returns the metadata of a decoded index.
func meta(ix map[string]any) map[string]any { return ix["metadata"].(map[string]any) }

// rewriteIndex rewrites the index at path as damage says.
func rewriteIndex(t *testing.T, path string, damage func(ix map[string]any, data []byte) []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ix map[string]any
	if err := json.Unmarshal(data, &ix); err != nil {
		t.Fatal(err)
	}
	out := damage(ix, data)
	if out == nil {
		if out, err = json.Marshal(ix); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenMissing opens a directory without a checkpoint.
func TestOpenMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(fmtErr(err), filepath.Join(dir, IndexFile)) {
		t.Fatalf("Open(empty dir) = %v, want an error naming the index that wraps fs.ErrNotExist", err)
	}
}
