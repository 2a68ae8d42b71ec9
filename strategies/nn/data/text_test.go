package data

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNewText(t *testing.T) {
	const corpus = "func main() {}\n"
	txt, err := NewText([]byte(corpus))
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte("\n ()acfimnu{}"); !slices.Equal(txt.Vocab, want) {
		t.Errorf("Vocab %q, want %q", txt.Vocab, want)
	}
	if txt.VocabSize() != len(txt.Vocab) {
		t.Errorf("VocabSize %d, len(Vocab) %d", txt.VocabSize(), len(txt.Vocab))
	}
	if got, err := txt.Decode(txt.Tokens); err != nil || got != corpus {
		t.Errorf("Decode(Tokens) = %q, %v, want %q", got, err, corpus)
	}
	ids, err := txt.Encode("main(){}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := txt.Decode(ids); err != nil || got != "main(){}" {
		t.Errorf("Decode(Encode(%q)) = %q, %v", "main(){}", got, err)
	}
	if _, err := NewText(nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("NewText(nil) error %v, want ErrEmpty", err)
	}
}

func TestTextCodingErrors(t *testing.T) {
	txt, err := NewText([]byte("abc"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = txt.Encode("abz")
	if want := `byte 'z' at offset 2 of the string is not in the vocabulary of 3 bytes`; !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("Encode error %v, want one containing %q wrapping ErrArgument", err, want)
	}
	_, err = txt.Decode([]uint16{0, 3})
	if want := "token 3 at position 1 is outside the vocabulary of 3"; !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("Decode error %v, want one containing %q wrapping ErrArgument", err, want)
	}
}

// writeTree writes files, relative path to content, under a new directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadText(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"b.txt":       "B",
		"a/z.txt":     "Z",
		"a/y.txt":     "Y",
		"c/empty.txt": "",
		"single.txt":  "S",
	})
	if err := os.Symlink(filepath.Join(dir, "b.txt"), filepath.Join(dir, "a", "link.txt")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		paths []string
		limit int
		want  string
	}{
		{"directory in lexical order, links skipped", []string{dir}, 0, "YZBS"},
		{"paths in the order given", []string{filepath.Join(dir, "single.txt"), filepath.Join(dir, "a")}, 0, "SYZ"},
		{"limit cuts short", []string{dir}, 3, "YZB"},
		{"limit inside a file", []string{filepath.Join(dir, "single.txt"), dir}, 2, "SY"},
		{"limit above the corpus", []string{dir}, 100, "YZBS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			txt, err := ReadText(tt.paths, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := txt.Decode(txt.Tokens); err != nil || got != tt.want {
				t.Errorf("ReadText read %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestReadTextErrors(t *testing.T) {
	dir := writeTree(t, map[string]string{"empty/a.txt": "", "full.txt": "x"})
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		name  string
		paths []string
		limit int
		is    error
		want  string
	}{
		{"no paths", nil, 0, ErrArgument, "no paths: pass at least one file or directory"},
		{"negative limit", []string{dir}, -1, ErrArgument, "byte limit -1"},
		{"missing path", []string{missing}, 0, os.ErrNotExist, missing},
		{"empty files", []string{filepath.Join(dir, "empty")}, 0, ErrEmpty, "are empty: pass files with text in them"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadText(tt.paths, tt.limit)
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadText error %v, want one containing %q wrapping %v", err, tt.want, tt.is)
			}
		})
	}
}

// TestGoSourceFilter runs GoSource's reader on a tree of its own: only .go
// files, in lexical order, and nothing under testdata.
func TestGoSourceFilter(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"b/b.go":           "b",
		"a.go":             "a",
		"a/x.go":           "x",
		"README":           "readme",
		"c/testdata/t.go":  "t",
		"c/testdata.go":    "d",
		"c/notes.txt":      "notes",
		"c/deeper/last.go": "l",
	})
	r := reader{keep: isGo, skipTestdata: true}
	if err := r.walk(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := r.buf.String(), "xabld"; got != want {
		t.Errorf("read %q, want %q", got, want)
	}
}

func TestLocateGoroot(t *testing.T) {
	good := writeTree(t, map[string]string{"src/a.go": "package a"})
	bare := t.TempDir()
	found := func() (string, error) { return good, nil }
	broken := func() (string, error) { return "", errors.New("exec: \"go\": executable file not found in $PATH") }
	tests := []struct {
		name        string
		builtIn     string
		env         string
		goEnv       func() (string, error)
		want        string
		wantErrPart string
	}{
		{"built-in root first", good, bare, broken, good, ""},
		{"environment second", bare, good, broken, good, ""},
		{"go env last", "", bare, found, good, ""},
		{"none", bare, "", broken, "", "runtime.GOROOT() = " + bare + " has no src directory; $GOROOT is empty; " +
			"`go env GOROOT` failed: exec: \"go\": executable file not found in $PATH): install Go, or set GOROOT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := locateGoroot(tt.builtIn, tt.env, tt.goEnv)
			if tt.wantErrPart != "" {
				if !errors.Is(err, ErrNoGoroot) || !strings.Contains(err.Error(), tt.wantErrPart) {
					t.Fatalf("locateGoroot = %q, %v, want an error containing %q wrapping ErrNoGoroot", got, err, tt.wantErrPart)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("locateGoroot = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestGoSource(t *testing.T) {
	root, err := goroot()
	if err != nil {
		t.Skipf("no Go source tree: %v", err)
	}
	const limit = 1 << 20
	txt, err := GoSource(limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(txt.Tokens) != limit {
		t.Errorf("GoSource(%d) read %d bytes from %s", limit, len(txt.Tokens), root)
	}
	if n := txt.VocabSize(); n < 60 || n > 256 {
		t.Errorf("vocabulary of %d bytes, want something like 100", n)
	}
	head, err := txt.Decode(txt.Tokens[:4096])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(head, "package ") {
		t.Errorf("the first 4 KiB of GoSource hold no package clause: %q", head[:200])
	}
	ids, err := txt.Encode(head)
	if err != nil || !slices.Equal(ids, txt.Tokens[:4096]) {
		t.Errorf("Encode(Decode(first 4 KiB)) differs from the tokens, error %v", err)
	}
	again, err := GoSource(limit)
	if err != nil || !slices.Equal(again.Tokens, txt.Tokens) || !slices.Equal(again.Vocab, txt.Vocab) {
		t.Errorf("a second GoSource(%d) read another corpus, error %v", limit, err)
	}
	if _, err := GoSource(-1); !errors.Is(err, ErrArgument) {
		t.Errorf("GoSource(-1) error %v, want ErrArgument", err)
	}
}
