// Package data feeds the data-parallel training examples: a distributed
// sampler, a synthetic classification set, and a character-level text
// corpus cut into sequences for a small GPT.
//
// The one promise that matters is that distributed training equals
// single-process training exactly. With N ranks and a global batch of B
// examples, a Sampler gives rank r the contiguous slice [r*B/N, (r+1)*B/N)
// of the very global batch a single process would draw at the same step, so
// the ranks' slices concatenated in rank order are the single-process batch,
// and an all-reduce that averages the ranks' gradients reproduces the
// single-process gradient. Every rank computes the same per-epoch
// permutation from (seed, epoch) alone, with no communication and no global
// random source, and batches are addressed by global step number, so a job
// resumed from a checkpoint at step s continues with exactly the batches it
// would have drawn.
//
// The data sets: Synthetic makes a deterministic classification set of
// Gaussian clusters (Classification). NewText, ReadText and GoSource build a
// byte-level Text whose vocabulary is the sorted set of bytes present;
// GoSource reads the Go distribution's own source, which every machine that
// builds gorun has. ReadTokens reads nanoGPT's train.bin format (Tokens).
// Sequences views a token stream as non-overlapping windows of a context
// length (SeqSet).
//
// Batch methods fill buffers that the caller owns and allocate nothing, so a
// training loop can reuse one set of buffers for every step. Bad arguments
// and malformed files are errors that wrap ErrArgument, ErrFormat, ErrEmpty
// or ErrNoGoroot; nothing in this package panics on bad input.
package data
