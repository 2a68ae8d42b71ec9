package nn

// Embedding is a lookup table of Vocab rows of Dim: token i's vector is
// row i. Its input is token ids rather than a tensor, so it is not a
// Layer: Forward takes the ids and may fail, and Backward returns nothing,
// since ids have no gradient.
type Embedding struct {
	Vocab, Dim int
	W          *Param // the table, "weight", [Vocab, Dim]

	ids   []int32 // a copy of the last Forward's ids, for Backward
	shape []int   // the output's shape
	y     *Tensor
}

// NewEmbedding declares weight of [vocab, dim] under b, drawn by init
// (GPT-2 uses Normal(0.02); PyTorch's Embedding, Normal(1)), with weight
// decay, as nanoGPT decays every parameter of two or more dimensions.
func NewEmbedding(b *Builder, vocab, dim int, init Init) *Embedding {
	return &Embedding{Vocab: vocab, Dim: dim, W: b.Param("weight", init, true, vocab, dim)}
}

// Params lists W.
func (e *Embedding) Params() []*Param { return []*Param{e.W} }

// Forward returns the rows of ids, shaped [shape..., Dim], where shape is
// the ids' own shape ([len(ids)] if none is given); the result is the
// layer's until its next call. It fails with an error that wraps ErrShape
// if shape does not hold len(ids) elements, and with one that wraps
// ErrIndex, before it writes anything, for an id outside [0, Vocab).
func (e *Embedding) Forward(ids []int32, shape ...int) (*Tensor, error) {
	if len(shape) == 0 {
		shape = []int{len(ids)}
	}
	if numel(shape) != len(ids) {
		return nil, errorf(ErrShape, "embedding %s: %d ids for shape %v: pass ids of the shape", e.W.Name, len(ids), shape)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= e.Vocab {
			return nil, errorf(ErrIndex, "embedding %s: id %d at position %d outside the vocabulary [0, %d): check the tokenizer against the model's vocabulary",
				e.W.Name, id, i, e.Vocab)
		}
	}
	e.ids = append(e.ids[:0], ids...)
	e.shape = append(append(e.shape[:0], shape...), e.Dim)
	e.y = Resize(e.y, e.shape...)
	d := e.Dim
	for i, id := range ids {
		copy(e.y.Data[i*d:(i+1)*d], e.W.W[int(id)*d:(int(id)+1)*d])
	}
	return e.y, nil
}

// Backward adds each row of dy, of the shape Forward returned, to the
// gradient of its id's row of the table.
func (e *Embedding) Backward(dy *Tensor) {
	d := e.Dim
	for i, id := range e.ids {
		g := e.W.G[int(id)*d : (int(id)+1)*d]
		for j, v := range dy.Data[i*d : (i+1)*d] {
			g[j] += v
		}
	}
}
