package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// readChunk is how many bytes ReadTokens decodes at a time; it is even, so
// that no token straddles two chunks.
const readChunk = 1 << 20

// maxVocab is the largest vocabulary that uint16 token ids can address.
const maxVocab = 1 << 16

// Tokens is a token stream read from a file, with the size of the
// vocabulary its ids come from. It is safe for concurrent reads.
type Tokens struct {
	// IDs holds the token ids in file order; each is below Vocab.
	IDs []uint16
	// Vocab is the size of the vocabulary.
	Vocab int
}

// ReadTokens reads a token file in nanoGPT's format (train.bin, val.bin): a
// flat array of little-endian uint16 token ids with no header. vocab is the
// size of the vocabulary the ids come from, such as 50257 for GPT-2's; 0
// means the largest id in the file plus one.
//
// It fails with an error that wraps ErrEmpty for an empty file, and one that
// wraps ErrFormat for a file of an odd number of bytes or one that holds an
// id not below vocab; both name the file. It fails with an error that wraps
// ErrArgument if vocab is negative or above 65536.
func ReadTokens(path string, vocab int) (*Tokens, error) {
	if vocab < 0 || vocab > maxVocab {
		return nil, errorf(ErrArgument, "vocabulary of %d for %s: pass 0 to take it from the file, or a size from 1 to %d", vocab, path, maxVocab)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading tokens: %w", err)
	}
	defer f.Close()
	var ids []uint16
	if info, err := f.Stat(); err == nil && info.Size() > 0 {
		ids = make([]uint16, 0, info.Size()/2)
	}
	buf := make([]byte, readChunk)
	var size int64
	for {
		n, err := io.ReadFull(f, buf)
		ids = decodeTokens(ids, buf[:n&^1])
		size += int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading tokens: %w", err)
		}
	}
	switch {
	case size == 0:
		return nil, errorf(ErrEmpty, "token file %s is empty: prepare it with the data set's tokenizer", path)
	case size%2 != 0:
		return nil, errorf(ErrFormat, "token file %s has %d bytes, an odd number, so it is not an array of uint16: check that it is a train.bin-style file and not truncated",
			path, size)
	}
	return checkVocab(path, ids, vocab)
}

// checkVocab returns the tokens ids, read from path, with vocabulary vocab, or with
// the largest id plus one if vocab is 0.
func checkVocab(path string, ids []uint16, vocab int) (*Tokens, error) {
	top := 0
	for i, id := range ids {
		if vocab > 0 && int(id) >= vocab {
			return nil, errorf(ErrFormat, "token file %s holds id %d at byte %d, outside the vocabulary of %d: pass the tokenizer's vocabulary size, or 0",
				path, id, 2*i, vocab)
		}
		top = max(top, int(id))
	}
	if vocab == 0 {
		vocab = top + 1
	}
	return &Tokens{IDs: ids, Vocab: vocab}, nil
}

// decodeTokens appends the little-endian uint16 ids in b, of even length,
// to ids.
func decodeTokens(ids []uint16, b []byte) []uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		ids = append(ids, binary.LittleEndian.Uint16(b[i:]))
	}
	return ids
}

// WriteTokens writes ids to path in the format ReadTokens reads, replacing
// any file there. It fails with an error that wraps ErrEmpty if ids is
// empty, since ReadTokens would refuse the file.
func WriteTokens(path string, ids []uint16) error {
	if len(ids) == 0 {
		return errorf(ErrEmpty, "no tokens to write to %s: pass at least one", path)
	}
	b := make([]byte, 2*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint16(b[2*i:], id)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("writing tokens: %w", err)
	}
	return nil
}

// SeqSet views a token stream as training examples for a language model
// with a context of T tokens: example i is the window
// x = tokens[i*T : i*T+T] and its targets, the same window shifted by one,
// y = tokens[i*T+1 : i*T+T+1]. The windows do not overlap, so the set has
// (len(tokens)-1)/T examples, and the last few tokens may belong to none.
// It is safe for concurrent reads.
type SeqSet struct {
	tokens []uint16
	t      int
}

// Sequences returns the examples of context length T in tokens, which the
// set shares rather than copies. It fails with an error that wraps
// ErrArgument if T is not positive or tokens holds fewer than T+1 tokens.
func Sequences(tokens []uint16, T int) (*SeqSet, error) {
	switch {
	case T <= 0:
		return nil, errorf(ErrArgument, "context length %d: pass at least 1", T)
	case len(tokens) < T+1:
		return nil, errorf(ErrArgument, "corpus of %d tokens is shorter than one example of context %d, which needs %d: use a longer corpus or a shorter context",
			len(tokens), T, T+1)
	}
	return &SeqSet{tokens: tokens, t: T}, nil
}

// Len returns the number of examples, (len(tokens)-1)/T: the n to give a
// Sampler.
func (s *SeqSet) Len() int { return (len(s.tokens) - 1) / s.t }

// Context returns T, the number of tokens in an example.
func (s *SeqSet) Context() int { return s.t }

// Batch copies the examples idx into the caller's buffers: row j of the
// batch, example idx[j], goes to x[j*T : (j+1)*T] and its targets to
// y[j*T : (j+1)*T]. It allocates nothing. It fails with an error that wraps
// ErrArgument, and writes nothing, if x or y is shorter than len(idx)*T or
// an index lies outside [0, Len()).
func (s *SeqSet) Batch(idx []int, x, y []int32) error {
	T := s.t
	if len(x) < len(idx)*T || len(y) < len(idx)*T {
		return errorf(ErrArgument, "batch of %d sequences of %d tokens needs x and y of %d, got %d and %d: size the buffers for the batch",
			len(idx), T, len(idx)*T, len(x), len(y))
	}
	n := s.Len()
	for j, i := range idx {
		if i < 0 || i >= n {
			return errorf(ErrArgument, "index %d (batch row %d) outside the %d sequences of context %d", i, j, n, T)
		}
	}
	for j, i := range idx {
		src := s.tokens[i*T : i*T+T+1]
		xr, yr := x[j*T:(j+1)*T], y[j*T:(j+1)*T]
		for k := range T {
			xr[k] = int32(src[k])
			yr[k] = int32(src[k+1])
		}
	}
	return nil
}
