package tp

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Group is a tensor-parallel group: the ranks that split each layer's
// matrices between them, and the context their collectives run under.
// Layers call its collectives from Forward and Backward, which return no
// error: a failed collective panics with an nn.Abort, which the driver
// running the pass recovers (nn.RecoverAbort). A Group is used by one
// goroutine at a time, the one that runs the model's passes.
type Group struct {
	Comm       *spmd.Comm
	Rank, Size int
	// SeqParallel is Megatron's sequence parallelism: outside the split
	// matrices each rank holds only its block of the token rows, and the
	// all-reduces become all-gathers and reduce-scatters.
	SeqParallel bool

	ctx   context.Context
	n, t  int // the micro-batch's sequences and tokens (SetTokens)
	first int // the index of its first sequence in the step's batch (SetFirst)
}

// NewGroup returns the group of c's ranks. c is the group's own: the
// layers' collectives run on it in the order the passes make them, so
// no other code may run collectives on it concurrently.
func NewGroup(c *spmd.Comm, seqParallel bool) *Group {
	return &Group{Comm: c, Rank: c.Rank(), Size: c.Size(), SeqParallel: seqParallel, ctx: context.Background()}
}

// Bind makes the collectives of the passes that follow run under ctx.
func (g *Group) Bind(ctx context.Context) { g.ctx = ctx }

// Context returns the context the collectives run under.
func (g *Group) Context() context.Context { return g.ctx }

// split reports whether the group has more than one rank: with one,
// every collective is the identity and none is made.
func (g *Group) split() bool { return g.Size > 1 }

// allReduce sums buf over the group in place.
func (g *Group) allReduce(what string, buf []float32) {
	if g.split() {
		g.check(what, prims.AllReduce(g.ctx, g.Comm, buf, prims.Sum[float32]()))
	}
}

// allReduceMax takes the element-wise maximum over the group in place.
func (g *Group) allReduceMax(what string, buf []float32) {
	if g.split() {
		g.check(what, prims.AllReduce(g.ctx, g.Comm, buf, prims.Max[float32]()))
	}
}

// allGather concatenates every rank's send, in rank order, into recv.
func (g *Group) allGather(what string, send, recv []float32) {
	if !g.split() {
		copy(recv, send)
		return
	}
	g.check(what, prims.AllGather(g.ctx, g.Comm, send, recv))
}

// reduceScatter sums send over the group and leaves block Rank of the
// sum (equal blocks) in recv.
func (g *Group) reduceScatter(what string, send, recv []float32) {
	if !g.split() {
		copy(recv, send)
		return
	}
	g.check(what, prims.ReduceScatter(g.ctx, g.Comm, send, recv, prims.Sum[float32]()))
}

func (g *Group) check(what string, err error) {
	if err != nil {
		panic(nn.Abort{Err: fmt.Errorf("tensor parallel %s on rank %d of %d: %w", what, g.Rank, g.Size, err)})
	}
}

// Part is this rank's block [Lo, Hi) of n things cut over the group,
// as prims.Block cuts them: the first n mod Size ranks one more.
func (g *Group) Part(n int) (lo, hi int) { return prims.Block(n, g.Size, g.Rank) }

// SetTokens tells the group the shape of the token rows of the
// micro-batch that the passes run next: n sequences of t tokens. With
// sequence parallelism each rank holds the block Rank of the n·t rows
// (cut in equal blocks, so n·t must divide by Size), and the split
// regions see all of them as [n, t, ·].
func (g *Group) SetTokens(n, t int) error {
	if g.SeqParallel && (n*t)%g.Size != 0 {
		return fmt.Errorf("sequence parallel: %d sequences of %d tokens do not cut into %d equal blocks of rows: pass a micro-batch whose tokens divide by the tensor-parallel size", n, t, g.Size)
	}
	g.n, g.t = n, t
	return nil
}

// SetFirst tells the group where the micro-batch that the passes run next
// sits in its step's whole batch (over every micro-batch and
// data-parallel replica): the index of its first sequence. Row-keyed
// dropout masks the rows of the whole batch (TokenRow), so that a step
// masks alike however its batch is cut.
func (g *Group) SetFirst(seq int) { g.first = seq }

// First returns the index SetFirst gave.
func (g *Group) First() int { return g.first }

// Tokens returns the shape SetTokens gave.
func (g *Group) Tokens() (n, t int) { return g.n, g.t }

// RowBlock returns the first of this rank's token rows and their number:
// with sequence parallelism its equal block of the n·t rows, else all.
func (g *Group) RowBlock() (first, rows int) {
	all := g.n * g.t
	if !g.SeqParallel {
		return 0, all
	}
	rows = all / g.Size
	return g.Rank * rows, rows
}

// full is the shape of the whole activation with cols columns.
func (g *Group) full(cols int) []int { return []int{g.n, g.t, cols} }

// local is the shape of this rank's rows of it: all of them ([n, t,
// cols]) without sequence parallelism, its block ([rows, cols]) with it.
func (g *Group) local(cols int) []int {
	if !g.SeqParallel {
		return g.full(cols)
	}
	_, rows := g.RowBlock()
	return []int{rows, cols}
}

// LocalShape is the shape of this rank's rows of an activation of cols
// columns: [N, T, cols], or [rows, cols] of its block with sequence
// parallelism.
func (g *Group) LocalShape(cols int) []int { return g.local(cols) }
