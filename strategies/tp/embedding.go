package tp

import (
	"fmt"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Embedding is Megatron's VocabParallelEmbedding: each rank holds the
// rows [Lo, Hi) of the table. A rank looks up the ids in its range and
// writes zeros for the others (masked), and an all-reduce (g) sums the
// ranks' rows, so each id gets the one rank's row that holds it; with
// sequence parallelism a reduce-scatter leaves each rank its token rows.
// Backward needs no communication (with sequence parallelism, an
// all-gather of the gradient's rows): each rank adds the rows of its ids.
type Embedding struct {
	G          *Group
	Vocab, Dim int
	Lo, Hi     int
	W          *nn.Param // [Hi-Lo, Dim]

	ids   []int32
	part  *nn.Tensor
	leave nn.Layer
}

// NewEmbedding declares weight [Hi-Lo, Dim] under b, this rank's rows of
// the vocabulary cut as prims.Block cuts it, drawn as the whole table's
// rows by init.
func NewEmbedding(b *nn.Builder, g *Group, vocab, dim int, init nn.Init) *Embedding {
	lo, hi := g.Part(vocab)
	e := &Embedding{G: g, Vocab: vocab, Dim: dim, Lo: lo, Hi: hi}
	e.W = b.Param("weight", Sliced(init, []int{vocab, dim}, 0, []Range{{lo, hi}}), true, hi-lo, dim)
	if g.SeqParallel {
		e.leave = &ScatterRows{G: g}
	} else {
		e.leave = &Reduce{G: g}
	}
	return e
}

// Params lists the table.
func (e *Embedding) Params() []*nn.Param { return []*nn.Param{e.W} }

// Shards says which rows of the whole table this rank holds.
func (e *Embedding) Shards() []Shard {
	return []Shard{{Param: e.W, Full: []int{e.Vocab, e.Dim}, Dim: 0, Parts: []Range{{e.Lo, e.Hi}}}}
}

// Forward returns the rows of n sequences of t ids, [n, t, Dim] (the
// rank's token rows with sequence parallelism). It fails with an error
// wrapping nn.ErrIndex, before any communication, for an id outside the
// vocabulary; every rank holds the same ids, so every rank fails alike.
func (e *Embedding) Forward(ids []int32, n, t int) (*nn.Tensor, error) {
	for i, id := range ids {
		if id < 0 || int(id) >= e.Vocab {
			return nil, fmt.Errorf("embedding %s: id %d at position %d outside the vocabulary [0, %d): check the tokenizer against the model's vocabulary: %w",
				e.W.Name, id, i, e.Vocab, nn.ErrIndex)
		}
	}
	if len(ids) != n*t {
		return nil, fmt.Errorf("embedding %s: %d ids for %d sequences of %d: %w", e.W.Name, len(ids), n, t, nn.ErrShape)
	}
	if gn, gt := e.G.Tokens(); e.G.SeqParallel && (gn != n || gt != t) {
		return nil, fmt.Errorf("embedding %s: %d sequences of %d, but the group's SetTokens said %d of %d: call SetTokens with the micro-batch's shape before its forward", e.W.Name, n, t, gn, gt)
	}
	e.ids = append(e.ids[:0], ids...)
	e.part = nn.Resize(e.part, n, t, e.Dim)
	d := e.Dim
	for i, id := range ids {
		row := e.part.Data[i*d : (i+1)*d]
		if int(id) < e.Lo || int(id) >= e.Hi {
			clear(row)
			continue
		}
		copy(row, e.W.W[(int(id)-e.Lo)*d:])
	}
	return e.leave.Forward(e.part, true), nil
}

// Backward adds each row of dy to the gradient of its id's row, for the
// ids this rank holds.
func (e *Embedding) Backward(dy *nn.Tensor) {
	dy = e.leave.Backward(dy)
	d := e.Dim
	for i, id := range e.ids {
		if int(id) < e.Lo || int(id) >= e.Hi {
			continue
		}
		g := e.W.G[(int(id)-e.Lo)*d : (int(id)-e.Lo+1)*d]
		for j, v := range dy.Data[i*d : (i+1)*d] {
			g[j] += v
		}
	}
}
