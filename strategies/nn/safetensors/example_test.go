package safetensors_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// A checkpoint written with WriteFile and read back with ReadFile; Python
// reads the same file with safetensors.torch.load_file.
func Example() {
	dir, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	tensors := []safetensors.Tensor{
		safetensors.F32("fc1.weight", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}),
		safetensors.F32("fc1.bias", []int{2}, []float32{0.5, -0.5}),
	}
	if err := safetensors.WriteFile(path, tensors, map[string]string{"format": "pt"}); err != nil {
		fmt.Println(err)
		return
	}

	f, err := safetensors.ReadFile(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	w, _ := f.Tensor("fc1.weight")
	values, err := w.Float32s()
	fmt.Println(f.Metadata["format"], w.DType, w.Shape, values, err)
	// Output: pt F32 [2 3] [1 2 3 4 5 6] <nil>
}

// Decode rejects a malformed file with an error that wraps ErrFormat and
// says what is wrong.
func ExampleDecode() {
	var b bytes.Buffer
	if err := safetensors.Encode(&b, []safetensors.Tensor{safetensors.F32("w", []int{4}, make([]float32, 4))}, nil); err != nil {
		fmt.Println(err)
		return
	}
	truncated := b.Bytes()[:b.Len()-4]
	_, err := safetensors.Decode(truncated)
	fmt.Println(errors.Is(err, safetensors.ErrFormat))
	fmt.Println(err)
	// Output:
	// true
	// safetensors: truncated: header says 16 bytes of data, file has 12
}

// Sort lays tensors out as Python's safetensors does, so that the two write
// the same bytes.
func ExampleSort() {
	tensors := []safetensors.Tensor{
		{Name: "mask", DType: safetensors.Bool, Shape: []int{1}, Data: []byte{1}},
		safetensors.F32("b", nil, []float32{1}),
		{Name: "step", DType: safetensors.Int64, Data: make([]byte, 8)},
		safetensors.F32("a", nil, []float32{2}),
	}
	safetensors.Sort(tensors)
	for _, t := range tensors {
		fmt.Print(t.Name, " ")
	}
	fmt.Println()
	// Output: step a b mask
}
