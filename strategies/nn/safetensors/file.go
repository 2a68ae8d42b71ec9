package safetensors

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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
// it writes a temporary file in the same directory, ".<name>.tmp-<digits>",
// syncs it, renames it over path and syncs the directory, so that path holds
// either its old content or the whole new file, even across a crash. On any
// error the temporary file is removed and path is left as it was. The new
// file has mode 0644.
//
// A crash mid-write (SIGKILL, a lost machine) leaves its temporary file
// behind: each WriteFile first removes those of path that earlier writes
// left. Writers may write one path at the same time (the last rename wins):
// a writer holds an advisory lock (flock) on its temporary file until the
// file has its final name, and only temporary files whose lock no process
// holds are removed. Where the system or file system has no flock, none is.
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
	removeStale(dir, base)
	tmp, err := createTemp(dir, base)
	if err != nil {
		return fmt.Errorf("%s: creating the temporary file: %w", path, err)
	}
	renamed := false
	defer func() { // on every failure, a panic included
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := writeTemp(tmp, hdr, tensors, wrap); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if closeBeforeRename {
		if err := tmp.Close(); err != nil {
			return fmt.Errorf("%s: closing %s: %w", path, tmp.Name(), err)
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	renamed = true
	if !closeBeforeRename {
		// Written and synced: closing lets the lock go.
		if err := tmp.Close(); err != nil {
			return fmt.Errorf("%s: written, but closing it failed: %w", path, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("%s: written, but syncing its directory failed: %w", path, err)
	}
	return nil
}

// tempPrefix begins the names of base's temporary files; os.CreateTemp
// ends them with decimal digits.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

// createTemp creates a temporary file for base in dir and locks it
// (lockTemp). A removeStale that opened the file before the lock was
// taken may have removed it since: then it makes another.
func createTemp(dir, base string) (*os.File, error) {
	for range maxTempTries {
		tmp, err := os.CreateTemp(dir, tempPrefix(base)+"*")
		if err != nil {
			return nil, err
		}
		if lockTemp(tmp) != nil {
			return tmp, nil // no locks here: nothing removes it either
		}
		fi, err := tmp.Stat()
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return nil, err
		}
		if now, err := os.Stat(tmp.Name()); err == nil && os.SameFile(fi, now) {
			return tmp, nil
		}
		tmp.Close()
	}
	return nil, fmt.Errorf("another process removed each of %d temporary files as it was made", maxTempTries)
}

// maxTempTries bounds createTemp's attempts.
const maxTempTries = 8

// removeStale removes the temporary files of base in dir that no writer
// holds any more: left by writes that a crash ended before their rename.
// Those being written, by this process or another, stay, and so does every
// one where there is no flock. It does its best: a file it cannot remove
// stays for the next write.
func removeStale(dir, base string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // creating the temporary file will say what is wrong
	}
	prefix := tempPrefix(base)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if ok && rest != "" && strings.Trim(rest, "0123456789") == "" && e.Type().IsRegular() {
			removeIfStale(filepath.Join(dir, e.Name()))
		}
	}
}

// removeIfStale removes the temporary file name if no process holds its
// lock, and name is still that file (its writer may have renamed it into
// place and let the lock go since the directory was read).
func removeIfStale(name string) {
	f, err := os.OpenFile(name, os.O_RDWR, 0) // read-write: NFS locks exclusively only so
	if err != nil {
		return
	}
	defer f.Close()
	if !tryLock(f) {
		return
	}
	fi, err := f.Stat()
	if err != nil {
		return
	}
	if now, err := os.Stat(name); err == nil && os.SameFile(fi, now) {
		os.Remove(name)
	}
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
