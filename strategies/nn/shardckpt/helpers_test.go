package shardckpt

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// tensorSpec is a whole tensor of a test's model.
type tensorSpec struct {
	name  string
	shape []int
	data  []float32
}

// testTensors returns a model's tensors: a few shapes, one smaller than any
// world size above 3, a scalar, an empty one, and values of every kind
// (NaN with a payload, -0, infinities, subnormals) to compare bit for bit.
func testTensors(seed uint64) []tensorSpec {
	rng := rand.New(rand.NewPCG(seed, 7))
	specs := []tensorSpec{
		{name: "wte.weight", shape: []int{7, 5}},
		{name: "h.0.attn.c_attn.weight", shape: []int{2, 3, 6}},
		{name: "h.0.ln_1.bias", shape: []int{3}},
		{name: "scale", shape: []int{}},
		{name: "empty", shape: []int{0, 4}},
		{name: "optim.exp_avg.wte.weight", shape: []int{7, 5}},
	}
	for i := range specs {
		n, _ := numel(specs[i].shape)
		specs[i].data = make([]float32, n)
		for j := range specs[i].data {
			specs[i].data[j] = float32(rng.NormFloat64())
		}
	}
	special := []float32{
		math.Float32frombits(0x7fc01234), float32(math.Copysign(0, -1)), float32(math.Inf(1)),
		float32(math.Inf(-1)), math.SmallestNonzeroFloat32, math.MaxFloat32,
	}
	copy(specs[0].data, special)
	return specs
}

// cut returns the range of elements [lo, hi) of tensor i of specs that
// rank of world holds. Cut per tensor, each rank holds an even share of
// each; cut flat, as ZeRO cuts, the tensors are laid end to end and each
// rank holds an even share of the whole, which crosses tensors' bounds.
func cut(specs []tensorSpec, i, rank, world int, flat bool) (lo, hi int) {
	n := len(specs[i].data)
	if !flat {
		return n * rank / world, n * (rank + 1) / world
	}
	off, total := 0, 0
	for j, s := range specs {
		if j < i {
			off += len(s.data)
		}
		total += len(s.data)
	}
	a, b := total*rank/world, total*(rank+1)/world
	lo, hi = min(max(a-off, 0), n), min(max(b-off, 0), n)
	return lo, max(lo, hi)
}

// rankPieces returns the pieces of specs that rank of world holds. Cut per
// tensor, it includes the empty ones, which WriteShard leaves out; cut flat,
// an empty tensor goes to rank 0 only.
func rankPieces(specs []tensorSpec, rank, world int, flat bool) []Piece {
	var ps []Piece
	for i, s := range specs {
		lo, hi := cut(specs, i, rank, world, flat)
		if flat && lo == hi && (len(s.data) > 0 || rank > 0) {
			continue
		}
		ps = append(ps, Piece{Tensor: s.name, Shape: s.shape, Lo: lo, Hi: hi, Data: slices.Clone(s.data[lo:hi])})
	}
	return ps
}

// save writes specs as the save tagged tag of world ranks, cut as flat
// says, and commits it.
func save(t testing.TB, dir, tag string, world int, specs []tensorSpec, flat bool) {
	t.Helper()
	writeShards(t, dir, tag, world, specs, flat)
	if err := Commit(dir, tag, world, map[string]string{"tag_of_test": tag}); err != nil {
		t.Fatalf("Commit(%q): %v", tag, err)
	}
}

// writeShards writes the shard files of specs for every rank of world,
// without committing them.
func writeShards(t testing.TB, dir, tag string, world int, specs []tensorSpec, flat bool) {
	t.Helper()
	for r := range world {
		name, err := WriteShard(dir, tag, r, world, rankPieces(specs, r, world, flat))
		if err != nil {
			t.Fatalf("WriteShard(%q, rank %d of %d): %v", tag, r, world, err)
		}
		if want := shardName(tag, r, world); name != want {
			t.Fatalf("WriteShard named its file %q, want %q", name, want)
		}
	}
}

// readAll reads every tensor of specs from ix as rank of world, cut as flat
// says, and reports any value that differs.
func readAll(t *testing.T, ix *Index, specs []tensorSpec, rank, world int, flat bool) {
	t.Helper()
	for i, s := range specs {
		lo, hi := cut(specs, i, rank, world, flat)
		checkRange(t, ix, s, lo, hi)
	}
}

// checkRange reads [lo, hi) of s from ix and compares it bit for bit.
func checkRange(t *testing.T, ix *Index, s tensorSpec, lo, hi int) {
	t.Helper()
	p := Piece{Tensor: s.name, Shape: s.shape, Lo: lo, Hi: hi}
	if err := ix.Read(&p); err != nil {
		t.Errorf("Read(%s): %v", &p, err)
		return
	}
	if diff := diffBits(p.Data, s.data[lo:hi]); diff != "" {
		t.Errorf("Read(%s): %s", &p, diff)
	}
}

// diffBits describes the first difference between got and want, bit for
// bit, or returns "".
func diffBits(got, want []float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Sprintf("value %d is %v (%#x), want %v (%#x)",
				i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	return ""
}

// shardFiles returns the names of the shard files in dir, sorted.
func shardFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "shard-*.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	return names
}
