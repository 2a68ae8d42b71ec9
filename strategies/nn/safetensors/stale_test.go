package safetensors

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteFileRemovesStaleTemps: a write removes the temporary files of
// its path that crashed writes left (no process holds them), and no other
// file: not another path's, not one of another name pattern.
func TestWriteFileRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.safetensors")
	stale := []string{".checkpoint.safetensors.tmp-999", ".checkpoint.safetensors.tmp-1234567890"}
	keep := []string{
		".other.safetensors.tmp-12",            // another path's
		".checkpoint.safetensors.tmp-notmine",  // not os.CreateTemp's digits
		"checkpoint.safetensors.tmp-5",         // not hidden
		".checkpoint.safetensors.tmp-",         // no digits
		".checkpoint.safetensors.json.tmp-123", // another path's
	}
	for _, n := range append(slices.Clone(stale), keep...) {
		if err := os.WriteFile(filepath.Join(dir, n), make([]byte, 100), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteFile(path, checkpoint(1), nil); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(keep), "checkpoint.safetensors")
	slices.Sort(want)
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Fatalf("directory holds %q, want %q", got, want)
	}
}

// TestWriteFileKeepsLiveTemps: a temporary file whose writer still holds
// it (locked, as WriteFile holds its own until the rename) is not removed
// by another write of the same path, so concurrent writers of one path
// each complete.
func TestWriteFileKeepsLiveTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.safetensors")
	live, err := createTemp(dir, "checkpoint.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := lockTemp(live); err != nil { // createTemp locked it; this says whether it could
		t.Skipf("no flock here (%v): WriteFile removes no temporary file", err)
	}
	if err := WriteFile(path, checkpoint(1), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Fatalf("the live writer's temporary file is gone: %v", err)
	}
	// The live writer finishes: its rename works, and nothing is left.
	if _, err := live.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(live.Name(), path); err != nil {
		t.Fatalf("the live writer's rename: %v", err)
	}
	live.Close()
	if got := dirNames(t, dir); !slices.Equal(got, []string{"checkpoint.safetensors"}) {
		t.Fatalf("directory holds %q", got)
	}
}

// TestWriteFilePanicRemovesTemp: a write that panics midway (a caller's
// writer, here) leaves no temporary file.
func TestWriteFilePanicRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		writeFile(path, checkpoint(1), nil, func(io.Writer) io.Writer { return panicWriter{} })
	}()
	if got := dirNames(t, dir); len(got) != 0 {
		t.Fatalf("directory holds %q, want nothing", got)
	}
}

type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("injected") }
