package data

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTokensRoundTrip(t *testing.T) {
	big := make([]uint16, readChunk) // two chunks' worth of bytes
	for i := range big {
		big[i] = uint16(i * 7919)
	}
	tests := []struct {
		name      string
		ids       []uint16
		vocab     int
		wantVocab int
	}{
		{"vocab from the file", []uint16{3, 1, 4, 1, 5, 9, 2, 6}, 0, 10},
		{"vocab given", []uint16{3, 1, 4}, 50257, 50257},
		{"one token", []uint16{0}, 0, 1},
		{"largest id", []uint16{65535}, 0, 65536},
		{"several chunks", big, 0, int(slices.Max(big)) + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "train.bin")
			if err := WriteTokens(path, tt.ids); err != nil {
				t.Fatal(err)
			}
			toks, err := ReadTokens(path, tt.vocab)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(toks.IDs, tt.ids) || toks.Vocab != tt.wantVocab {
				t.Errorf("read %d ids with vocabulary %d, want %d ids with vocabulary %d (ids equal: %v)",
					len(toks.IDs), toks.Vocab, len(tt.ids), tt.wantVocab, slices.Equal(toks.IDs, tt.ids))
			}
		})
	}
}

func TestTokensLittleEndian(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.bin")
	if err := os.WriteFile(path, []byte{0x01, 0x02, 0xff, 0x00}, 0o644); err != nil {
		t.Fatal(err)
	}
	toks, err := ReadTokens(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint16{0x0201, 0x00ff}; !slices.Equal(toks.IDs, want) {
		t.Errorf("read %#x, want %#x", toks.IDs, want)
	}
}

func TestReadTokensErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	empty := write("empty.bin", nil)
	odd := write("odd.bin", []byte{1, 0, 2})
	wide := write("wide.bin", []byte{1, 0, 200, 0})
	missing := filepath.Join(dir, "missing.bin")
	tests := []struct {
		name  string
		path  string
		vocab int
		is    error
		want  string
	}{
		{"empty file", empty, 0, ErrEmpty, "token file " + empty + " is empty"},
		{"odd length", odd, 0, ErrFormat, "token file " + odd + " has 3 bytes, an odd number"},
		{"id outside vocab", wide, 100, ErrFormat, "token file " + wide + " holds id 200 at byte 2, outside the vocabulary of 100"},
		{"missing file", missing, 0, os.ErrNotExist, missing},
		{"negative vocab", wide, -1, ErrArgument, "vocabulary of -1 for " + wide},
		{"vocab too large", wide, 1 << 17, ErrArgument, "a size from 1 to 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadTokens(tt.path, tt.vocab)
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadTokens error %v, want one containing %q wrapping %v", err, tt.want, tt.is)
			}
		})
	}
	if err := WriteTokens(filepath.Join(dir, "none.bin"), nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("WriteTokens of no ids: error %v, want ErrEmpty", err)
	}
}

func FuzzDecodeTokens(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4})
	f.Add([]byte{0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := decodeTokens(nil, b)
		if len(ids) != len(b)/2 {
			t.Fatalf("%d bytes decode to %d ids, want %d", len(b), len(ids), len(b)/2)
		}
		back := make([]byte, 0, len(b))
		for _, id := range ids {
			back = binary.LittleEndian.AppendUint16(back, id)
		}
		if !slices.Equal(back, b[:len(b)&^1]) {
			t.Fatalf("ids %v encode to %v, want %v", ids, back, b[:len(b)&^1])
		}
	})
}

func TestSequences(t *testing.T) {
	tokens := []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name    string
		T       int
		wantLen int
		idx     []int
		wantX   []int32
		wantY   []int32
	}{
		{"T 3", 3, 3, []int{2, 0}, []int32{6, 7, 8, 0, 1, 2}, []int32{7, 8, 9, 1, 2, 3}},
		{"T 5 uses the last token", 5, 2, []int{1}, []int32{5, 6, 7, 8, 9}, []int32{6, 7, 8, 9, 10}},
		{"T 10 is one example", 10, 1, []int{0}, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"T 1", 1, 10, []int{9, 4}, []int32{9, 4}, []int32{10, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Sequences(tokens, tt.T)
			if err != nil {
				t.Fatal(err)
			}
			if s.Len() != tt.wantLen || s.Context() != tt.T {
				t.Fatalf("Len %d Context %d, want %d %d", s.Len(), s.Context(), tt.wantLen, tt.T)
			}
			x, y := make([]int32, len(tt.wantX)), make([]int32, len(tt.wantY))
			if err := s.Batch(tt.idx, x, y); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(x, tt.wantX) || !slices.Equal(y, tt.wantY) {
				t.Errorf("Batch(%v) = x %v y %v, want %v %v", tt.idx, x, y, tt.wantX, tt.wantY)
			}
			if allocs := testing.AllocsPerRun(100, func() { _ = s.Batch(tt.idx, x, y) }); allocs != 0 {
				t.Errorf("Batch allocates %v times, want 0", allocs)
			}
		})
	}
}

func TestSequencesErrors(t *testing.T) {
	tokens := []uint16{0, 1, 2, 3, 4, 5, 6}
	for _, tt := range []struct {
		name string
		T    int
		want string
	}{
		{"zero context", 0, "context length 0: pass at least 1"},
		{"corpus too short", 7, "corpus of 7 tokens is shorter than one example of context 7, which needs 8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Sequences(tokens, tt.T)
			if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Sequences error %v, want one containing %q wrapping ErrArgument", err, tt.want)
			}
		})
	}
	s, err := Sequences(tokens, 3) // 2 examples
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		idx  []int
		x, y int
		want string
	}{
		{"short x", []int{0, 1}, 5, 6, "batch of 2 sequences of 3 tokens needs x and y of 6, got 5 and 6"},
		{"short y", []int{0}, 3, 2, "got 3 and 2"},
		{"index too large", []int{0, 2}, 6, 6, "index 2 (batch row 1) outside the 2 sequences of context 3"},
		{"negative index", []int{-1}, 3, 3, "index -1 (batch row 0)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Batch(tt.idx, make([]int32, tt.x), make([]int32, tt.y))
			if !errors.Is(err, ErrArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Batch error %v, want one containing %q wrapping ErrArgument", err, tt.want)
			}
		})
	}
}
