// Package nn is the layer substrate that gorun's training drivers stand
// on: float32 tensors, layers with hand-written Forward and Backward,
// models whose parameters live in one flat buffer and whose gradients
// live in another, optimizers over ranges of those buffers, and seeded
// random streams.
//
// One flat buffer per model is FSDP's FlatParameter idea: a gradient
// bucket, a ZeRO shard, a checkpoint and a compressed payload are all
// ranges of one slice, so no driver copies parameters into a layout of its
// own. A Builder declares the parameters, Build allocates the two buffers
// and gives each Param its views (W and G) into them.
//
// A model's Backward accumulates into the gradient buffer and reports each
// layer's parameters as ready (Store.OnReady) in the order it produces
// them, last layer first, so that a data-parallel driver can start
// reducing a bucket while the layers below are still computing.
//
// The layers are Linear, ReLU, GeLU, LayerNorm, Dropout and Attention
// (each a Layer), Block (a GPT-2 transformer block, also a Layer) and
// Embedding, whose input is token ids. The models are Sequential (NewMLP)
// for classification and GPT, a GPT-2 style language model with
// nanoGPT's parameter names. Every Backward is checked against finite
// differences in gradcheck_test.go.
//
// Matrix products go through gonum's blas32 interface. The first product
// installs this package's AVX2/FMA GEMM (strategies/nn/gemm) in place of
// gonum's pure-Go one, unless the program has already chosen another
// implementation with blas32.Use.
package nn
