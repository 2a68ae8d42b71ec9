package shardckpt

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// TestReshard saves a model at one world size and reads it back as every
// rank of other world sizes would, cut per tensor and flat, and as
// arbitrary ranges; every value must come back bit for bit.
func TestReshard(t *testing.T) {
	tests := []struct {
		name  string
		world int
		flat  bool
	}{
		{"world 4 per tensor", 4, false},
		{"world 4 flat", 4, true},
		{"world 3 flat", 3, true},
		{"world 1", 1, false},
		{"world 7, more ranks than some tensors have elements", 7, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			specs := testTensors(1)
			save(t, dir, "step-1", tt.world, specs, tt.flat)
			ix, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			checkIndex(t, ix, specs, tt.world)
			for _, world := range []int{1, 2, 3, 4, 5} {
				for _, flat := range []bool{false, true} {
					readAsWorld(t, ix, specs, world, flat)
				}
			}
			rng := rand.New(rand.NewPCG(uint64(tt.world), 3))
			for _, s := range specs {
				for range 20 {
					lo := rng.IntN(len(s.data) + 1)
					hi := lo + rng.IntN(len(s.data)-lo+1)
					checkRange(t, ix, s, lo, hi)
				}
			}
		})
	}
}

// readAsWorld reads specs from one Index as the ranks of world would, each
// in a goroutine of its own.
func readAsWorld(t *testing.T, ix *Index, specs []tensorSpec, world int, flat bool) {
	t.Helper()
	var wg sync.WaitGroup
	for r := range world {
		wg.Go(func() { readAll(t, ix, specs, r, world, flat) })
	}
	wg.Wait()
}

// checkIndex checks what an Index says of the checkpoint of specs saved at
// world.
func checkIndex(t *testing.T, ix *Index, specs []tensorSpec, world int) {
	t.Helper()
	if ix.World() != world {
		t.Errorf("World() = %d, want %d", ix.World(), world)
	}
	var names []string
	total := 0
	for _, s := range specs {
		names = append(names, s.name)
		total += 4 * len(s.data)
		if shape, ok := ix.Shape(s.name); !ok || !slices.Equal(shape, s.shape) {
			t.Errorf("Shape(%q) = %v, %v, want %v", s.name, shape, ok, s.shape)
		}
	}
	slices.Sort(names)
	if got := ix.Tensors(); !slices.Equal(got, names) {
		t.Errorf("Tensors() = %q, want %q", got, names)
	}
	md := ix.Meta()
	want := map[string]string{
		"format": "gorun-sharded-1", "world_size": strconv.Itoa(world),
		"total_size": strconv.Itoa(total), "tag_of_test": "step-1",
	}
	for k, v := range want {
		if md[k] != v {
			t.Errorf("Meta()[%q] = %q, want %q", k, md[k], v)
		}
	}
	if _, ok := ix.Shape("no.such.tensor"); ok {
		t.Error(`Shape("no.such.tensor") reports a tensor`)
	}
}

// TestShardLayout checks that a shard file holds a whole tensor under its
// name and shape, as Python's safetensors expects, and a part under
// "name[lo:hi]" as a 1-D tensor.
func TestShardLayout(t *testing.T) {
	dir := t.TempDir()
	specs := testTensors(2)
	writeShards(t, dir, "t", 4, specs, false)
	tests := []struct {
		rank  int
		key   string
		shape []int
		data  []float32
	}{
		{3, "scale", []int{}, specs[3].data},                    // the one element goes to rank 3 of 4
		{0, "empty", []int{0, 4}, nil},                          // every rank holds the empty tensor whole
		{1, "wte.weight[8:17]", []int{9}, specs[0].data[8:17]},  // 35*1/4 = 8, 35*2/4 = 17
		{2, "h.0.ln_1.bias[1:2]", []int{1}, specs[2].data[1:2]}, // 3*2/4 = 1, 3*3/4 = 2
		{3, "h.0.attn.c_attn.weight[27:36]", []int{9}, specs[1].data[27:]},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			f, err := safetensors.ReadFile(dir + "/" + shardName("t", tt.rank, 4))
			if err != nil {
				t.Fatal(err)
			}
			if f.Metadata["format"] != "pt" {
				t.Errorf(`metadata "format" is %q, want "pt"`, f.Metadata["format"])
			}
			st, ok := f.Tensor(tt.key)
			if !ok {
				t.Fatalf("rank %d's shard has no tensor %q", tt.rank, tt.key)
			}
			got, err := st.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(st.Shape, tt.shape) {
				t.Errorf("shape %v, want %v", st.Shape, tt.shape)
			}
			if diff := diffBits(got, tt.data); diff != "" {
				t.Error(diff)
			}
		})
	}
	f, err := safetensors.ReadFile(dir + "/" + shardName("t", 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range f.Tensors {
		if st.Name == "scale" || st.Name == "h.0.ln_1.bias[0:0]" {
			t.Errorf("rank 0's shard holds %q, an empty part", st.Name)
		}
	}
}
