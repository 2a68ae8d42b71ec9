package shardckpt

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommitReplaces saves three times: each committed save replaces the
// one before and removes its files; a save cut short before its Commit
// leaves the last committed one loadable, and the next Commit removes what
// it left behind.
func TestCommitReplaces(t *testing.T) {
	dir := t.TempDir()
	first, second, third, fourth := testTensors(1), testTensors(2), testTensors(3), testTensors(4)
	save(t, dir, "step-1", 4, first, true)
	save(t, dir, "step-2", 2, second, false)
	wantFiles(t, dir, "step-2", 2)
	loadable(t, dir, second, 2)

	// A save at world 3 crashes: its shards are written, a temporary shard
	// and a temporary index are left behind, and no Commit comes.
	writeShards(t, dir, "step-3", 3, third, true)
	stale := []string{
		".shard-00001-of-00003.step-3.safetensors.tmp-12345",
		"." + IndexFile + ".tmp-678",
	}
	keep := []string{"config.json", "notes.tmp-1", "shard-notes.txt"}
	for _, name := range append(slices.Clone(stale), keep...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loadable(t, dir, second, 2)

	save(t, dir, "step-4", 1, fourth, false)
	wantFiles(t, dir, "step-4", 1)
	loadable(t, dir, fourth, 1)
	for _, name := range stale {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("the stale file %s is still there after Commit (Stat: %v)", name, err)
		}
	}
	for _, name := range keep {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("Commit removed %s, which is not the checkpoint's: %v", name, err)
		}
	}
}

// TestCommitAgain commits the same save twice, as a driver might after an
// error, and finds the checkpoint unchanged.
func TestCommitAgain(t *testing.T) {
	dir := t.TempDir()
	specs := testTensors(5)
	save(t, dir, "s", 2, specs, true)
	before, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := Commit(dir, "s", 2, map[string]string{"tag_of_test": "s"}); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("committing again changed the index:\n%s\nwas\n%s", after, before)
	}
	loadable(t, dir, specs, 2)
}

// wantFiles checks that the shard files in dir are exactly those of the
// save tagged tag at world.
func wantFiles(t *testing.T, dir, tag string, world int) {
	t.Helper()
	var want []string
	for r := range world {
		want = append(want, shardName(tag, r, world))
	}
	if got := shardFiles(t, dir); !slices.Equal(got, want) {
		t.Errorf("shard files %q, want %q", got, want)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), tmpInfix) && strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

// loadable checks that dir's checkpoint is specs saved at world, read by
// two ranks.
func loadable(t *testing.T, dir string, specs []tensorSpec, world int) {
	t.Helper()
	ix, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ix.World() != world {
		t.Errorf("World() = %d, want %d", ix.World(), world)
	}
	for r := range 2 {
		readAll(t, ix, specs, r, 2, true)
	}
}

// TestCommitCrash crashes a Commit before and after it puts the new index
// in place: the directory holds the old checkpoint or the new one, whole,
// and the next Commit removes what the crash left.
func TestCommitCrash(t *testing.T) {
	errCrash := errors.New("crash")
	tests := []struct {
		name  string
		write func(path string, data []byte) error
		after int // which save is the checkpoint after the crash: 1 or 2
	}{
		{"before the index is written", func(string, []byte) error { return errCrash }, 1},
		{"with the index half written", func(path string, data []byte) error {
			tmp := filepath.Join(filepath.Dir(path), "."+IndexFile+tmpInfix+"crashed")
			return errors.Join(os.WriteFile(tmp, data[:len(data)/2], 0o644), errCrash)
		}, 1},
		{"after the index is renamed, before the old files are removed", func(path string, data []byte) error {
			return errors.Join(writeAtomic(path, data), errCrash)
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			saves := [][]tensorSpec{nil, testTensors(1), testTensors(2), testTensors(3)}
			save(t, dir, "step-1", 4, saves[1], true)
			writeShards(t, dir, "step-2", 2, saves[2], false)
			if err := commit(dir, "step-2", 2, nil, tt.write); !errors.Is(err, errCrash) {
				t.Fatalf("commit = %v, want the crash", err)
			}
			loadable(t, dir, saves[tt.after], []int{0, 4, 2}[tt.after])
			wantFilesOf(t, dir, "step-1", 4)
			wantFilesOf(t, dir, "step-2", 2)

			save(t, dir, "step-3", 3, saves[3], true)
			wantFiles(t, dir, "step-3", 3)
			loadable(t, dir, saves[3], 3)
		})
	}
}
