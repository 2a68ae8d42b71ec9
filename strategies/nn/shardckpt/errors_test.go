package shardckpt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// shape35 is the shape of the tensor that the error tests cut.
var shape35 = []int{5, 7}

// piece returns a piece of tensor "w", of shape35, holding [lo, hi).
func piece(lo, hi int) Piece {
	data := make([]float32, hi-lo)
	for i := range data {
		data[i] = float32(lo + i)
	}
	return Piece{Tensor: "w", Shape: shape35, Lo: lo, Hi: hi, Data: data}
}

// TestCommitErrors commits saves that must not become checkpoints; each
// Commit must fail, say why, and leave the previous checkpoint in place.
func TestCommitErrors(t *testing.T) {
	tests := []struct {
		name   string
		world  int               // Commit's world size
		shards map[int][]Piece   // by rank, written at world size written
		wrote  int               // the world size the shards were written at
		meta   map[string]string // Commit's meta
		want   []string          // in the error
	}{
		{
			name: "pieces overlap across shards", world: 2, wrote: 2,
			shards: map[int][]Piece{0: {piece(0, 20)}, 1: {piece(15, 35)}},
			want: []string{"[15, 35)", "[0, 20)", "overlap",
				shardName("new", 0, 2), shardName("new", 1, 2)},
		},
		{
			name: "a gap between the shards", world: 2, wrote: 2,
			shards: map[int][]Piece{0: {piece(0, 10)}, 1: {piece(15, 35)}},
			want:   []string{`"w"`, "[10, 15)", "in no shard file"},
		},
		{
			name: "the end of a tensor missing", world: 2, wrote: 2,
			shards: map[int][]Piece{0: {piece(0, 10)}, 1: {piece(10, 30)}},
			want:   []string{`"w"`, "[30, 35)", "in no shard file"},
		},
		{
			name: "shapes disagree", world: 2, wrote: 2,
			shards: map[int][]Piece{0: {piece(0, 10)}, 1: {{Tensor: "w", Shape: []int{35}, Lo: 10, Hi: 35, Data: make([]float32, 25)}}},
			want:   []string{"[5 7]", "[35]", shardName("new", 0, 2), shardName("new", 1, 2)},
		},
		{
			name: "a shard missing", world: 3, wrote: 3,
			shards: map[int][]Piece{0: {piece(0, 10)}, 2: {piece(20, 35)}},
			want:   []string{"found 2 of the save's 3 shard files", shardName("new", 1, 3)},
		},
		{
			name: "shards of another world size", world: 2, wrote: 4,
			shards: map[int][]Piece{0: {piece(0, 10)}, 1: {piece(10, 35)}},
			want:   []string{"world size 4, not 2"},
		},
		{
			name: "no shards at all", world: 1, wrote: 1,
			want: []string{"found 0 of the save's 1 shard files"},
		},
		{
			name: "meta takes a key of Commit's", world: 1, wrote: 1,
			shards: map[int][]Piece{0: {piece(0, 35)}},
			meta:   map[string]string{"world_size": "8"},
			want:   []string{`"world_size"`},
		},
		{
			name: "world size zero", world: 0, wrote: 1,
			shards: map[int][]Piece{0: {piece(0, 35)}},
			want:   []string{"world size 0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			old := testTensors(1)
			save(t, dir, "old", 2, old, true)
			for r, ps := range tt.shards {
				if _, err := WriteShard(dir, "new", r, tt.wrote, ps); err != nil {
					t.Fatal(err)
				}
			}
			err := Commit(dir, "new", tt.world, tt.meta)
			if err == nil {
				t.Fatal("Commit succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Commit = %v; want it to say %q", err, w)
				}
			}
			t.Log(err)
			wantFilesOf(t, dir, "old", 2)
			loadable(t, dir, old, 2)
		})
	}
}

// wantFilesOf checks that the shard files of the save tagged tag at world
// are all in dir.
func wantFilesOf(t *testing.T, dir, tag string, world int) {
	t.Helper()
	for r := range world {
		if _, err := os.Stat(filepath.Join(dir, shardName(tag, r, world))); err != nil {
			t.Error(err)
		}
	}
}

// TestWriteShardErrors writes shards that must be refused.
func TestWriteShardErrors(t *testing.T) {
	tests := []struct {
		name        string
		tag         string
		rank, world int
		pieces      []Piece
		want        string
	}{
		{"empty tag", "", 0, 1, nil, `tag ""`},
		{"tag with a slash", "a/b", 0, 1, nil, `tag "a/b"`},
		{"tag beginning with a dot", ".a", 0, 1, nil, `tag ".a"`},
		{"rank beyond the world", "t", 2, 2, nil, "rank 2 is not in a world of 2"},
		{"negative rank", "t", -1, 2, nil, "rank -1"},
		{"data too short", "t", 0, 1, []Piece{{Tensor: "w", Shape: shape35, Lo: 0, Hi: 35, Data: make([]float32, 34)}},
			"34 values of data for 35 elements"},
		{"range beyond the shape", "t", 0, 1, []Piece{{Tensor: "w", Shape: shape35, Lo: 30, Hi: 36, Data: make([]float32, 6)}},
			"range [30, 36) is not within the 35 elements"},
		{"no name", "t", 0, 1, []Piece{{Shape: []int{1}, Lo: 0, Hi: 1, Data: make([]float32, 1)}}, "no tensor name"},
		{"negative dimension", "t", 0, 1, []Piece{{Tensor: "w", Shape: []int{-1}}}, "shape [-1]"},
		{"pieces overlap", "t", 0, 1, []Piece{piece(0, 10), piece(9, 20)}, "pieces w[0:10] and w[9:20] of tensor \"w\" overlap"},
		{"shapes disagree", "t", 0, 1, []Piece{piece(0, 10), {Tensor: "w", Shape: []int{35}, Lo: 10, Hi: 11, Data: []float32{0}}},
			`tensor "w" has shape`},
		{"the committed checkpoint's tag", "old", 0, 2, []Piece{piece(0, 35)}, "committed checkpoint's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			save(t, dir, "old", 2, testTensors(1), false)
			before := shardFiles(t, dir)
			_, err := WriteShard(dir, tt.tag, tt.rank, tt.world, tt.pieces)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WriteShard = %v, want an error saying %q", err, tt.want)
			}
			if got := shardFiles(t, dir); len(got) != len(before) {
				t.Errorf("WriteShard failed but left files: %q, was %q", got, before)
			}
		})
	}
}

// TestReadErrors asks for pieces that the checkpoint cannot give.
func TestReadErrors(t *testing.T) {
	tests := []struct {
		name string
		p    Piece
		want string
	}{
		{"unknown tensor", Piece{Tensor: "v", Shape: shape35, Lo: 0, Hi: 1}, `no tensor "v"`},
		{"other shape", Piece{Tensor: "w", Shape: []int{35}, Lo: 0, Hi: 1}, "shape [5 7] in the checkpoint, not [35]"},
		{"scalar asked of a tensor", Piece{Tensor: "w", Lo: 0, Hi: 1}, "not []"},
		{"range beyond the tensor", Piece{Tensor: "w", Shape: shape35, Lo: 30, Hi: 36}, "[30, 36) is not within the 35"},
		{"range reversed", Piece{Tensor: "w", Shape: shape35, Lo: 5, Hi: 4}, "[5, 4)"},
		{"no room for the data", Piece{Tensor: "w", Shape: shape35, Lo: 0, Hi: 4, Data: make([]float32, 3)}, "3 values of room for 4"},
		{"a range that no shard holds", Piece{Tensor: "w", Shape: shape35, Lo: 5, Hi: 25}, `elements [10, 20) of tensor "w" are in no shard file`},
	}
	dir := t.TempDir()
	for r, ps := range [][]Piece{{piece(0, 10)}, {piece(10, 20)}, {piece(20, 35)}} {
		if _, err := WriteShard(dir, "t", r, 3, ps); err != nil {
			t.Fatal(err)
		}
	}
	if err := Commit(dir, "t", 3, nil); err != nil {
		t.Fatal(err)
	}
	// Drop the middle piece from the index, as Commit never would.
	rewriteIndex(t, filepath.Join(dir, IndexFile), func(ix map[string]any, _ []byte) []byte {
		pieces := ix["pieces"].(map[string]any)
		ps := pieces["w"].([]any)
		pieces["w"] = []any{ps[0], ps[2]}
		return nil
	})
	ix, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ix.Read(&tt.p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Read(%s) = %v, want an error saying %q", &tt.p, err, tt.want)
			}
			if errors.Is(err, ErrCorrupt) {
				t.Errorf("Read(%s) = %v, which blames the files for the caller's mistake", &tt.p, err)
			}
		})
	}
	p := Piece{Tensor: "w", Shape: shape35, Lo: 22, Hi: 35}
	if err := ix.Read(&p); err != nil || p.Data[0] != 22 || p.Data[12] != 34 {
		t.Errorf("Read(w[22:35]) = %v, %v; want 22 to 34", err, p.Data)
	}
}

// TestCommitBadShard damages a shard file between WriteShard and Commit;
// Commit must refuse it, naming it, and leave the old checkpoint in place.
func TestCommitBadShard(t *testing.T) {
	tests := []struct {
		name   string
		damage func(dir string) error
		want   string
	}{
		{"truncated in the length", func(dir string) error {
			return os.Truncate(filepath.Join(dir, shardName("new", 1, 2)), 5)
		}, "truncated within the header"},
		{"truncated in the header", func(dir string) error {
			return os.Truncate(filepath.Join(dir, shardName("new", 1, 2)), 50)
		}, "truncated within the header"},
		{"truncated in the data", func(dir string) error {
			path := filepath.Join(dir, shardName("new", 1, 2))
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, st.Size()-4)
		}, "do not fit"},
		{"data grown", func(dir string) error {
			path := filepath.Join(dir, shardName("new", 1, 2))
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, st.Size()+4)
		}, "bytes of data"},
		{"header not JSON", func(dir string) error {
			return flip(filepath.Join(dir, shardName("new", 1, 2)), 8)
		}, "not a JSON object"},
		{"header length too large", func(dir string) error {
			return flip(filepath.Join(dir, shardName("new", 1, 2)), 7)
		}, "over the limit"},
		{"another rank's file", func(dir string) error {
			data, err := os.ReadFile(filepath.Join(dir, shardName("new", 0, 2)))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, shardName("new", 1, 2)), data, 0o644)
		}, `rank "0" of "2"`},
		{"not a shard file", func(dir string) error {
			return safetensors.WriteFile(filepath.Join(dir, shardName("new", 1, 2)), nil, map[string]string{"format": "pt"})
		}, `shard_format is ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			old := testTensors(1)
			save(t, dir, "old", 2, old, true)
			writeShards(t, dir, "new", 2, testTensors(2), false)
			if err := tt.damage(dir); err != nil {
				t.Fatal(err)
			}
			err := Commit(dir, "new", 2, nil)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(fmtErr(err), shardName("new", 1, 2)) ||
				!strings.Contains(fmtErr(err), tt.want) {
				t.Fatalf("Commit = %v, want an error naming %s, saying %q, that wraps ErrCorrupt",
					err, shardName("new", 1, 2), tt.want)
			}
			t.Log(err)
			loadable(t, dir, old, 2)
		})
	}
}
