package nn_test

import (
	"fmt"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// A tiny GPT learns a repeating sequence with AdamW.
func ExampleGPT() {
	cfg := nn.GPTConfig{Vocab: 5, Context: 8, Layers: 1, Heads: 2, Dim: 16}
	g, err := nn.NewGPT(cfg, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Two sequences of 8 tokens of 0 1 2 3 4 0 1 ..., each target the next token.
	b := &nn.Batch{N: 2, T: 8, Tokens: make([]int32, 16), Y: make([]int32, 16)}
	for i := range b.Tokens {
		b.Tokens[i] = int32(i % 5)
		b.Y[i] = int32((i + 1) % 5)
	}
	st := g.Store()
	adam := nn.DefaultAdamW()
	adam.LR = 1e-2
	opt, err := nn.NewAdamW(adam, st.Params, 0, len(st.W))
	if err != nil {
		fmt.Println(err)
		return
	}
	var first, loss float32
	for step := 0; step < 30; step++ {
		st.ZeroGrads()
		if loss, err = g.Forward(b, true); err != nil {
			fmt.Println(err)
			return
		}
		g.Backward(1)
		opt.Step(st.W, st.G)
		if step == 0 {
			first = loss
		}
	}
	fmt.Printf("%d parameters; loss fell below a tenth: %v\n", len(st.W), loss < first/10)
	// Output: 3600 parameters; loss fell below a tenth: true
}
