package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Text is a corpus tokenized byte by byte: each distinct byte of the corpus
// is one token, and the vocabulary is the sorted set of bytes present, so a
// corpus of Go source has a vocabulary of about a hundred. It is safe for
// concurrent reads.
type Text struct {
	// Vocab holds the bytes of the vocabulary in increasing order; token id
	// t stands for byte Vocab[t].
	Vocab []byte
	// Tokens holds the corpus as token ids, one per byte.
	Tokens []uint16

	id [256]int16 // byte -> token id, or -1 for a byte not in Vocab
}

// NewText tokenizes corpus. The vocabulary is the sorted set of bytes in
// corpus. It fails with an error that wraps ErrEmpty if corpus is empty.
func NewText(corpus []byte) (*Text, error) {
	if len(corpus) == 0 {
		return nil, errorf(ErrEmpty, "empty corpus: a text needs at least one byte")
	}
	var present [256]bool
	for _, b := range corpus {
		present[b] = true
	}
	t := &Text{Tokens: make([]uint16, len(corpus))}
	for b := range present {
		t.id[b] = -1
		if present[b] {
			t.id[b] = int16(len(t.Vocab))
			t.Vocab = append(t.Vocab, byte(b))
		}
	}
	for i, b := range corpus {
		t.Tokens[i] = uint16(t.id[b])
	}
	return t, nil
}

// VocabSize returns the number of distinct tokens, len(Vocab).
func (t *Text) VocabSize() int { return len(t.Vocab) }

// Encode returns the token ids of s, one per byte. It fails with an error
// that wraps ErrArgument if s holds a byte outside the vocabulary, naming
// the byte and its offset.
func (t *Text) Encode(s string) ([]uint16, error) {
	out := make([]uint16, len(s))
	for i := 0; i < len(s); i++ {
		id := t.id[s[i]]
		if id < 0 {
			return nil, errorf(ErrArgument, "byte %q at offset %d of the string is not in the vocabulary of %d bytes: use only bytes of the corpus",
				s[i], i, len(t.Vocab))
		}
		out[i] = uint16(id)
	}
	return out, nil
}

// Decode returns the bytes that the token ids stand for. It fails with an
// error that wraps ErrArgument if an id is not below VocabSize(), naming the
// id and its position.
func (t *Text) Decode(ids []uint16) (string, error) {
	var b strings.Builder
	b.Grow(len(ids))
	for i, id := range ids {
		if int(id) >= len(t.Vocab) {
			return "", errorf(ErrArgument, "token %d at position %d is outside the vocabulary of %d: pass ids below %d",
				id, i, len(t.Vocab), len(t.Vocab))
		}
		b.WriteByte(t.Vocab[id])
	}
	return b.String(), nil
}

// goEnvTimeout bounds the `go env GOROOT` that GoSource may run.
const goEnvTimeout = 30 * time.Second

// GoSource returns the Go distribution's own source, the *.go files under
// $GOROOT/src, as a Text: every machine that builds gorun has it. The files
// are read in the lexical order of filepath.WalkDir, so every rank reads the
// same corpus, and directories named testdata are skipped. Reading stops
// after maxBytes bytes in all, cutting the last file short; 0 means no limit
// (the whole tree is about 100 MB, and its tokens take twice that).
//
// GOROOT is runtime.GOROOT() if that directory has a src directory, else the
// GOROOT environment variable, else the output of `go env GOROOT`. If none
// has a src directory, GoSource fails with an error that wraps ErrNoGoroot
// and lists what it tried.
func GoSource(maxBytes int) (*Text, error) {
	if maxBytes < 0 {
		return nil, errorf(ErrArgument, "byte limit %d: pass 0 for no limit or a positive limit", maxBytes)
	}
	root, err := goroot()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(root, "src")
	r := reader{
		limit:        maxBytes,
		keep:         isGo,
		skipTestdata: true,
	}
	if err := r.walk(src); err != nil {
		return nil, err
	}
	if r.buf.Len() == 0 {
		return nil, errorf(ErrEmpty, "no .go files under %s: point GOROOT at a complete Go installation", src)
	}
	return NewText(r.buf.Bytes())
}

// ReadText reads the files named by paths, in the order given, into a Text;
// a directory stands for the regular files under it, walked in the lexical
// order of filepath.WalkDir. Reading stops after maxBytes bytes in all,
// cutting the last file short; 0 means no limit. It fails if a path cannot
// be read, and with an error that wraps ErrEmpty if the files hold no bytes.
func ReadText(paths []string, maxBytes int) (*Text, error) {
	switch {
	case len(paths) == 0:
		return nil, errorf(ErrArgument, "no paths: pass at least one file or directory")
	case maxBytes < 0:
		return nil, errorf(ErrArgument, "byte limit %d: pass 0 for no limit or a positive limit", maxBytes)
	}
	r := reader{limit: maxBytes}
	for _, p := range paths {
		if err := r.walk(p); err != nil {
			return nil, err
		}
		if r.full() {
			break
		}
	}
	if r.buf.Len() == 0 {
		return nil, errorf(ErrEmpty, "the files under %s are empty: pass files with text in them", strings.Join(paths, ", "))
	}
	return NewText(r.buf.Bytes())
}

// isGo reports whether path names a Go source file.
func isGo(path string) bool { return strings.HasSuffix(path, ".go") }

// reader gathers the bytes of files up to a limit.
type reader struct {
	limit        int                    // 0 for no limit
	keep         func(path string) bool // nil keeps every regular file
	skipTestdata bool                   // skip directories named testdata
	buf          bytes.Buffer
}

// full reports whether the reader has reached its limit.
func (r *reader) full() bool { return r.limit > 0 && r.buf.Len() >= r.limit }

// walk appends the file root, or the kept regular files under the
// directory root, until the reader is full. A root that is a symbolic link
// is followed; links under it are not.
func (r *reader) walk(root string) error {
	info, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("reading text: %w", err)
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return errorf(ErrArgument, "%s is neither a regular file nor a directory: pass files or directories of text", root)
		}
		if err := r.add(root); err != nil {
			return fmt.Errorf("reading text: %w", err)
		}
		return nil
	}
	dir, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("reading text: %w", err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && r.skipTestdata && d.Name() == "testdata":
			return fs.SkipDir
		case !d.Type().IsRegular() || (r.keep != nil && !r.keep(path)):
			return nil
		}
		if err := r.add(path); err != nil {
			return err
		}
		if r.full() {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading text under %s: %w", root, err)
	}
	return nil
}

// add appends the file path, cut short at the reader's limit.
func (r *reader) add(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var src io.Reader = f
	if r.limit > 0 {
		src = io.LimitReader(f, int64(r.limit-r.buf.Len()))
	}
	_, err = r.buf.ReadFrom(src)
	return err
}

// goroot returns the root of a Go installation that has a src directory.
func goroot() (string, error) {
	// runtime.GOROOT is deprecated because the root the binary was built
	// with may be gone where it runs; locateGoroot checks that it is there.
	return locateGoroot(runtime.GOROOT(), os.Getenv("GOROOT"), goEnvGoroot)
}

// locateGoroot returns the first of the built-in root, the environment's
// root and the root that goEnv reports that has a src directory; goEnv runs
// only if neither of the others has.
func locateGoroot(builtIn, env string, goEnv func() (string, error)) (string, error) {
	var tried []string
	try := func(how, root string) bool {
		if root == "" {
			tried = append(tried, how+" is empty")
			return false
		}
		if info, err := os.Stat(filepath.Join(root, "src")); err != nil || !info.IsDir() {
			tried = append(tried, fmt.Sprintf("%s = %s has no src directory", how, root))
			return false
		}
		return true
	}
	if try("runtime.GOROOT()", builtIn) {
		return builtIn, nil
	}
	if try("$GOROOT", env) {
		return env, nil
	}
	if root, err := goEnv(); err != nil {
		tried = append(tried, fmt.Sprintf("`go env GOROOT` failed: %v", err))
	} else if try("`go env GOROOT`", root) {
		return root, nil
	}
	return "", errorf(ErrNoGoroot, "no Go source tree (%s): install Go, or set GOROOT to a Go installation, or read a corpus of your own with ReadText",
		strings.Join(tried, "; "))
}

// goEnvGoroot returns what `go env GOROOT` prints.
func goEnvGoroot() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), goEnvTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
