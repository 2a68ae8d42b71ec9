package safetensors

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkpoint is a small set of tensors for the file tests.
func checkpoint(scale float32) []Tensor {
	return []Tensor{
		F32("fc1.weight", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		F32("fc1.bias", []int{2}, []float32{scale, -scale}),
		{Name: "step", DType: Int64, Shape: []int{}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
	}
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	for _, scale := range []float32{0.5, 2} { // the second write replaces the first
		want := checkpoint(scale)
		if err := WriteFile(path, want, map[string]string{"format": "pt"}); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		f, err := ReadFile(path)
		if err != nil {
			t.Fatalf("ReadFile: %v", err)
		}
		if diff := sameTensors(f.Tensors, want); diff != "" {
			t.Fatal(diff)
		}
		if f.Metadata["format"] != "pt" {
			t.Fatalf("metadata %v", f.Metadata)
		}
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"model.safetensors"}) {
		t.Fatalf("directory holds %q, want only model.safetensors", names)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("Stat: %v, %v; want mode 0644", fi, err)
	}
}

func TestReadFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	var good bytes.Buffer
	if err := Encode(&good, checkpoint(1), nil); err != nil {
		t.Fatal(err)
	}
	valid := good.Bytes()
	corrupt := bytes.Replace(slices.Clone(valid), []byte(`"F32"`), []byte(`"F31"`), 1)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated data", valid[:len(valid)-5], "truncated: header says 40 bytes of data, file has 35"},
		{"truncated header", valid[:20], "truncated: header length says"},
		{"truncated length", valid[:4], "truncated: 4 bytes"},
		{"empty", nil, "truncated: 0 bytes"},
		{"corrupted dtype", corrupt, `tensor "fc1.weight": unknown or unsupported dtype "F31"`},
		{"extra bytes", append(slices.Clone(valid), 0), "1 bytes of data follow the last tensor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(path)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			if want := path + ": " + tt.want; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error %q, want it to start %q", err, want)
			}
		})
	}
	_, err := ReadFile(filepath.Join(dir, "missing.safetensors"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing.safetensors") {
		t.Fatalf("missing file: %v", err)
	}
}

// failingWriter passes through n bytes, then fails.
type failingWriter struct {
	w io.Writer
	n int
}

var errInjected = errors.New("injected write error")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n, _ := f.w.Write(p[:f.n])
		f.n = 0
		return n, errInjected
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestWriteFileLeavesOldFileOnError(t *testing.T) {
	big := make([]float32, 1<<16) // larger than the write buffer, so writes fail mid-file
	tests := []struct {
		name    string
		tensors []Tensor
		wrap    func(io.Writer) io.Writer
		setup   func(t *testing.T, dir string)
		wantErr error
	}{
		{"write fails at once", checkpoint(3), func(w io.Writer) io.Writer { return &failingWriter{w: w} }, nil, errInjected},
		{"write fails mid-file", []Tensor{F32("big", []int{len(big)}, big)},
			func(w io.Writer) io.Writer { return &failingWriter{w: w, n: 100_000} }, nil, errInjected},
		{"invalid tensor", []Tensor{F32("bad", []int{5}, nil)}, nil, nil, ErrInvalid},
		{"read-only directory", checkpoint(3), nil, func(t *testing.T, dir string) {
			if os.Geteuid() == 0 {
				t.Skip("running as root, which may write to a read-only directory")
			}
			if err := os.Chmod(dir, 0o555); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o755) })
		}, os.ErrPermission},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "model.safetensors")
			if err := WriteFile(path, checkpoint(1), nil); err != nil {
				t.Fatal(err)
			}
			old, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			err = writeFile(path, tt.tensors, nil, tt.wrap)
			if !errors.Is(err, tt.wantErr) || !strings.HasPrefix(err.Error(), path+": ") {
				t.Fatalf("error %v, want %v naming %s", err, tt.wantErr, path)
			}
			if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, old) {
				t.Fatalf("the old file changed (%v)", err)
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"model.safetensors"}) {
				t.Fatalf("directory holds %q, want only model.safetensors", names)
			}
		})
	}
}

func TestWriteFileRenameFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	if err := os.MkdirAll(filepath.Join(path, "keep"), 0o755); err != nil { // a directory in the way
		t.Fatal(err)
	}
	err := WriteFile(path, checkpoint(1), nil)
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("error %v, want one naming %s", err, path)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"model.safetensors"}) {
		t.Fatalf("directory holds %q, want only the directory model.safetensors", names)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir.safetensors"), checkpoint(1), nil); err == nil ||
		!strings.Contains(err.Error(), "dir.safetensors") {
		t.Fatalf("missing directory: %v", err)
	}
}

func TestWriteFileRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := WriteFile("model.safetensors", checkpoint(1), nil); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if _, err := ReadFile("model.safetensors"); err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
}
