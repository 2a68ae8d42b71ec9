package safetensors

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ReadFile reads and decodes the safetensors file at path, checking it as
// Decode does. Every error names the file: "ckpt/model.safetensors:
// truncated: header says 4096 bytes of data, file has 100".
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // an *os.PathError, which names path
	}
	f, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// WriteFile writes tensors and metadata to path as Encode does, atomically:
// it writes a temporary file in the same directory, syncs it, renames it over
// path and syncs the directory, so that path holds either its old content or
// the whole new file, even across a crash. On any error the temporary file
// is removed and path is left as it was. The new file has mode 0644.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	return writeFile(path, tensors, metadata, nil)
}

// writeFile is WriteFile; a non-nil wrap wraps the temporary file's writer,
// so that tests can inject write errors.
func writeFile(path string, tensors []Tensor, metadata map[string]string, wrap func(io.Writer) io.Writer) error {
	hdr, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("%s: creating the temporary file: %w", path, err)
	}
	if err := writeTemp(tmp, hdr, tensors, wrap); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: closing %s: %w", path, tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%s: written, but syncing its directory failed: %w", path, err)
	}
	return nil
}

// writeTemp writes the file's content to tmp and syncs it.
func writeTemp(tmp *os.File, hdr []byte, tensors []Tensor, wrap func(io.Writer) io.Writer) error {
	var w io.Writer = tmp
	if wrap != nil {
		w = wrap(w)
	}
	if err := writeEncoded(w, hdr, tensors); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	return tmp.Sync()
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
