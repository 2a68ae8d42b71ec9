package tp_test

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// A column-parallel layer holds its rank's columns of the weight, drawn
// as the unsplit layer's: on one rank (a program started without a
// launcher) it is the whole nn.Linear.
func ExampleColumnLinear() {
	ctx := context.Background()
	w, err := spmd.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	g := tp.NewGroup(w.Comm, false)
	g.Bind(ctx)

	// 6 output columns, cut over the group as prims.Block cuts them.
	lo, hi := g.Part(6)
	b := nn.NewBuilder()
	col := tp.NewColumnLinear(b.Scope("fc"), g, 4, 6, true, nn.Normal(0.02), []tp.Range{{Lo: lo, Hi: hi}})
	col.Gather = true // every rank gets all 6 columns
	b.Build(1)

	ref := nn.NewBuilder()
	lin := nn.NewLinearInit(ref.Scope("fc"), 4, 6, true, nn.Normal(0.02))
	ref.Build(1)

	x := nn.NewTensor(2, 3, 4) // 2 sequences of 3 tokens
	for i := range x.Data {
		x.Data[i] = float32(i%5) - 2
	}
	y := col.Forward(x, false)
	want := lin.Forward(x, false)
	same := true
	for i := range want.Data {
		same = same && y.Data[i] == want.Data[i]
	}
	fmt.Printf("rank %d of %d holds columns [%d, %d) of %s\n", g.Rank, g.Size, lo, hi, col.Lin.W.Name)
	fmt.Printf("output %v, equal to nn.Linear's: %v\n", y.Shape, same)
	// Output:
	// rank 0 of 1 holds columns [0, 6) of fc.weight
	// output [2 3 6], equal to nn.Linear's: true
}

// A transformer block over a group: the heads and the MLP's hidden units
// are split, the rest replicated (or, with SeqParallel, split by token
// rows). Its passes make their collectives themselves; a failed one
// panics with an nn.Abort, which the driver recovers.
func ExampleBlock() {
	ctx := context.Background()
	w, err := spmd.Init(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	g := tp.NewGroup(w.Comm, false)
	g.Bind(ctx)

	cfg := nn.GPTConfig{Vocab: 16, Context: 4, Layers: 1, Heads: 2, Dim: 8}
	b := nn.NewBuilder()
	blk, err := tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(1), "h.0")
	if err != nil {
		fmt.Println(err)
		return
	}
	st := b.Build(1)

	pass := func() (err error) {
		defer nn.RecoverAbort(&err)
		if err := g.SetTokens(2, 4); err != nil {
			return err
		}
		x := nn.NewTensor(2, 4, cfg.Dim)
		for i := range x.Data {
			x.Data[i] = float32(i%7) / 7
		}
		y := blk.Forward(x, true)
		blk.Backward(y) // the gradient of ½‖y‖²
		return nil
	}
	if err := pass(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d parameters on rank %d of %d, the first %s\n", len(st.W), g.Rank, g.Size, st.Params[0].Name)
	// Output: 872 parameters on rank 0 of 1, the first h.0.ln_1.weight
}
