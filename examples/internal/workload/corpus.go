package workload

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// Corpus is the token stream a GPT trains on, read from a --data flag:
// text files (byte-level, one token per distinct byte), a nanoGPT token
// file (.bin: little-endian uint16 ids), or by default the Go
// distribution's source.
type Corpus struct {
	Tokens []uint16
	// Vocab is the vocabulary the ids need: the text's distinct bytes, or
	// a token file's largest id plus one. Every token is below it.
	Vocab int
	// bin is the token file's path, "" for text.
	bin string
}

// ReadCorpus reads what --data names: a comma-separated list of text
// files or directories, read up to maxBytes in all (0: no limit); one
// file ending in .bin, read whole as nanoGPT's train.bin; or, when
// dataFlag is "", the Go source up to maxBytes. An odd-sized or empty
// .bin is an error that names the file, as is a .bin listed with other
// files.
func ReadCorpus(dataFlag string, maxBytes int) (*Corpus, error) {
	if dataFlag == "" {
		txt, err := data.GoSource(maxBytes)
		if err != nil {
			return nil, err
		}
		return &Corpus{Tokens: txt.Tokens, Vocab: txt.VocabSize()}, nil
	}
	paths := strings.Split(dataFlag, ",")
	isBin := func(p string) bool { return filepath.Ext(p) == ".bin" }
	switch {
	case len(paths) == 1 && isBin(paths[0]):
		t, err := data.ReadTokens(paths[0], 0)
		if err != nil {
			return nil, fmt.Errorf("--data: %w", err)
		}
		return &Corpus{Tokens: t.IDs, Vocab: t.Vocab, bin: paths[0]}, nil
	case slices.ContainsFunc(paths, isBin):
		return nil, fmt.Errorf("--data %s: a .bin token file is read alone, not with other files: pass it by itself", dataFlag)
	}
	txt, err := data.ReadText(paths, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	return &Corpus{Tokens: txt.Tokens, Vocab: txt.VocabSize()}, nil
}

// CheckVocab says whether a model vocabulary of vocab tokens (--vocab)
// holds every id of the corpus; 0 takes the corpus's own.
func (c *Corpus) CheckVocab(vocab int) error {
	switch {
	case vocab == 0 || vocab >= c.Vocab:
		return nil
	case c.bin != "":
		return fmt.Errorf("--vocab %d: token file %s holds ids up to %d: pass at least %d (its tokenizer's vocabulary, such as 50257 for GPT-2's), or 0", vocab, c.bin, c.Vocab-1, c.Vocab)
	}
	return fmt.Errorf("--vocab %d: the corpus has %d distinct bytes: pass at least %d, or 0", vocab, c.Vocab, c.Vocab)
}
