package nn

import "testing"

// BenchmarkGPTStep runs one forward and backward pass of a small GPT on
// 4 sequences of 64 tokens; tokens/s is the throughput.
func BenchmarkGPTStep(b *testing.B) {
	cfg := GPTConfig{Vocab: 512, Context: 64, Layers: 2, Heads: 4, Dim: 128}
	g, err := NewGPT(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	batch := tinyBatch(cfg, 4, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := g.Forward(batch, true); err != nil {
			b.Fatal(err)
		}
		g.Backward(1)
	}
	b.ReportMetric(float64(b.N*batch.N*batch.T)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkAttention runs one forward and backward pass of attention
// over 4 sequences of 128 positions, width 128 in 4 heads.
func BenchmarkAttention(b *testing.B) {
	bl := NewBuilder()
	a := NewAttention(bl.Scope("attn"), 128, 4, Normal(0.02), Normal(0.02))
	bl.Build(1)
	x := randTensor(1, 4, 128, 128)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		a.Backward(a.Forward(x, true))
	}
}
