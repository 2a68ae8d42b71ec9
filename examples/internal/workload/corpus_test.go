package workload

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// TestReadCorpus: a .bin is nanoGPT's uint16 tokens, its vocabulary its
// largest id plus one; text is bytes; an odd .bin, or one listed with
// other files, is an error naming it.
func TestReadCorpus(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "train.bin")
	ids := []uint16{3, 299, 0, 17, 299, 5}
	if err := data.WriteTokens(bin, ids); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCorpus(bin, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Tokens, ids) || c.Vocab != 300 {
		t.Errorf("%s: tokens %v vocab %d, want %v vocab 300", bin, c.Tokens, c.Vocab, ids)
	}

	txt := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(txt, []byte("abcab"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := ReadCorpus(txt, 0); err != nil || len(c.Tokens) != 5 || c.Vocab != 3 {
		t.Errorf("%s: %+v, %v, want 5 tokens of 3", txt, c, err)
	}

	odd := filepath.Join(dir, "odd.bin")
	if err := os.WriteFile(odd, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ flag, want string }{
		{odd, "--data: token file " + odd + " has 3 bytes, an odd number"},
		{txt + "," + bin, "a .bin token file is read alone"},
	} {
		if _, err := ReadCorpus(tc.flag, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--data %s: %v, want %q", tc.flag, err, tc.want)
		}
	}
}

// TestCheckVocab: a model vocabulary below the corpus's ids is refused,
// saying the least that holds them.
func TestCheckVocab(t *testing.T) {
	bin := &Corpus{Vocab: 300, bin: "train.bin"}
	text := &Corpus{Vocab: 97}
	for _, tc := range []struct {
		c     *Corpus
		vocab int
		want  string // "" for none
	}{
		{bin, 0, ""}, {bin, 300, ""}, {bin, 50304, ""}, {text, 97, ""},
		{bin, 299, "--vocab 299: token file train.bin holds ids up to 299: pass at least 300"},
		{text, 5, "--vocab 5: the corpus has 97 distinct bytes: pass at least 97, or 0"},
	} {
		err := tc.c.CheckVocab(tc.vocab)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("vocab %d over %+v: %v, want %q", tc.vocab, tc.c, err, tc.want)
		}
	}
}
