package data_test

import (
	"fmt"
	"slices"

	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// Two ranks with a global batch of 4 each take half of the batch that one
// process would take, at every step of every epoch.
func ExampleSampler() {
	const n, batch, seed = 10, 4, 1
	single, err := data.NewSampler(n, batch, 0, 1, seed, true)
	if err != nil {
		fmt.Println(err)
		return
	}
	for step := range 3 {
		var both []int
		for rank := range 2 {
			s, err := data.NewSampler(n, batch, rank, 2, seed, true)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("step %d (epoch %d) rank %d: %v\n", step, s.Epoch(step), rank, s.Local(step))
			both = append(both, s.Local(step)...)
		}
		fmt.Println("  equals the single-process batch:", slices.Equal(both, single.Global(step)))
	}
	_, err = data.NewSampler(n, 3, 0, 2, seed, true)
	fmt.Println(err)
	// Output:
	// step 0 (epoch 0) rank 0: [7 6]
	// step 0 (epoch 0) rank 1: [1 3]
	//   equals the single-process batch: true
	// step 1 (epoch 0) rank 0: [2 4]
	// step 1 (epoch 0) rank 1: [8 9]
	//   equals the single-process batch: true
	// step 2 (epoch 1) rank 0: [2 5]
	// step 2 (epoch 1) rank 1: [8 3]
	//   equals the single-process batch: true
	// global batch 3 does not split over 2 ranks: pass a multiple of 2
}

// A corpus of 11 tokens cut into windows of 4 has two examples; the targets
// are the inputs shifted by one token.
func ExampleSequences() {
	txt, err := data.NewText([]byte("hello world"))
	if err != nil {
		fmt.Println(err)
		return
	}
	seqs, err := data.Sequences(txt.Tokens, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	x, y := make([]int32, 4), make([]int32, 4)
	for i := range seqs.Len() {
		if err := seqs.Batch([]int{i}, x, y); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("example %d: %q -> %q\n", i, decode(txt, x), decode(txt, y))
	}
	// Output:
	// example 0: "hell" -> "ello"
	// example 1: "o wo" -> " wor"
}

// decode returns the text that the token ids in ids stand for.
func decode(txt *data.Text, ids []int32) string {
	u := make([]uint16, len(ids))
	for i, id := range ids {
		u[i] = uint16(id)
	}
	s, err := txt.Decode(u)
	if err != nil {
		return err.Error()
	}
	return s
}
