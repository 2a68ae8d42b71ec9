package shardckpt_test

import (
	"fmt"
	"os"

	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// Two ranks save a tensor of six elements, three each; one process loads
// it whole, and another the middle four elements, which lie in both files.
func Example() {
	dir, err := os.MkdirTemp("", "ckpt")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	w := []float32{1, 2, 3, 4, 5, 6}
	const world = 2
	for rank := range world {
		lo, hi := 3*rank, 3*rank+3
		p := shardckpt.Piece{Tensor: "fc1.weight", Shape: []int{2, 3}, Lo: lo, Hi: hi, Data: w[lo:hi]}
		if _, err := shardckpt.WriteShard(dir, "step-000100", rank, world, []shardckpt.Piece{p}); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := shardckpt.Commit(dir, "step-000100", world, map[string]string{"step": "100"}); err != nil {
		fmt.Println(err)
		return
	}

	ix, err := shardckpt.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	shape, _ := ix.Shape("fc1.weight")
	whole := shardckpt.Piece{Tensor: "fc1.weight", Shape: shape, Lo: 0, Hi: 6}
	middle := shardckpt.Piece{Tensor: "fc1.weight", Shape: shape, Lo: 1, Hi: 5}
	for _, p := range []*shardckpt.Piece{&whole, &middle} {
		if err := ix.Read(p); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(ix.Tensors(), shape, ix.World(), ix.Meta()["step"])
	fmt.Println(whole.Data, middle.Data)
	// Output:
	// [fc1.weight] [2 3] 2 100
	// [1 2 3 4 5 6] [2 3 4 5]
}
