package workload

import (
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// mlpInputs and mlpClasses are MNIST's shape, which the benchmark model
// (784-1024-1024-10) has.
const (
	mlpInputs  = 784
	mlpClasses = 10
)

// mlp builds the classifier and its synthetic set; it returns the set's
// size.
func (w *Workload) mlp() (int, error) {
	hidden, err := w.cfg.hidden()
	if err != nil {
		return 0, err
	}
	set, err := data.Synthetic(w.cfg.Examples, mlpInputs, mlpClasses, w.cfg.Seed)
	if err != nil {
		return 0, err
	}
	sizes := append(append([]int{mlpInputs}, hidden...), mlpClasses)
	w.Model = nn.NewMLP(w.cfg.Seed, sizes...)
	w.fill = func(idx []int, b *nn.Batch) error {
		n := len(idx)
		if len(b.X) != n*mlpInputs {
			b.X, b.Y = make([]float32, n*mlpInputs), make([]int32, n)
		}
		b.N, b.XDim = n, mlpInputs
		return set.Batch(idx, b.X, b.Y)
	}
	return set.Len(), nil
}

// gpt builds the character-level GPT and its text: --data's files, a
// nanoGPT token file (.bin), or the Go distribution's source.
func (w *Workload) gpt() (int, error) {
	tokens, vocab, err := w.corpus()
	if err != nil {
		return 0, err
	}
	seqs, err := data.Sequences(tokens, w.cfg.Context)
	if err != nil {
		return 0, err
	}
	m, err := nn.NewGPT(nn.GPTConfig{Vocab: vocab, Context: w.cfg.Context, Layers: w.cfg.Layers,
		Heads: w.cfg.Heads, Dim: w.cfg.Dim, Dropout: float32(w.cfg.Dropout)}, w.cfg.Seed)
	if err != nil {
		return 0, err
	}
	w.Model, w.gptNet, w.vocab = m, m, vocab
	T := w.cfg.Context
	w.fill = func(idx []int, b *nn.Batch) error {
		n := len(idx)
		if len(b.Tokens) != n*T {
			b.Tokens, b.Y = make([]int32, n*T), make([]int32, n*T)
		}
		b.N, b.T = n, T
		return seqs.Batch(idx, b.Tokens, b.Y)
	}
	return seqs.Len(), nil
}

func (w *Workload) corpus() ([]uint16, int, error) {
	c, err := ReadCorpus(w.cfg.Data, w.cfg.MaxBytes)
	if err != nil {
		return nil, 0, err
	}
	return c.Tokens, c.Vocab, nil
}
