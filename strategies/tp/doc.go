// Package tp is tensor parallelism as Megatron-LM does it (Shoeybi et
// al. 2019; sequence parallelism from Korthikanti et al. 2022): the ranks
// of a Group split each layer's weight matrices between them, and every
// split layer computes exactly what the single-process layer of package
// nn does, forward and backward, whatever the group's size.
//
// # Layers
//
// ColumnLinear splits a weight's output columns (and its bias), so each
// rank computes its columns of the output; with Gather they are
// all-gathered back. RowLinear splits a weight's input rows and takes
// the matching columns of its input (a ColumnLinear's output), so each
// rank computes a partial product, which is summed. MLP pairs them
// (c_fc by columns, GeLU, c_proj by rows) and Attention splits the heads
// (c_attn by each head's q, k and v columns, c_proj by rows), so that
// neither needs anything from the other ranks between its two products.
// Embedding and CrossEntropy split the vocabulary: a rank looks up the
// ids of its rows of the table, and the loss is computed from three
// all-reduces of one number per row (the maximum, the target's logit,
// the sum of the exponentials) without any rank holding a whole row of
// logits. Block is GPT-2's pre-LN transformer block from these parts;
// its parameter names are nn.NewBlock's.
//
// Each split parameter is initialised by Sliced: the whole parameter is
// drawn as the unsplit model would draw it and the rank keeps its part,
// so a split model starts from the single-process model's weights. A
// layer's Shards say which part of each whole parameter a rank holds;
// Shard.Paste rebuilds the whole, for a checkpoint or a test.
//
// # The f and g operators
//
// A split region is entered through Megatron's f (Copy: the identity
// forward, an all-reduce of the gradient backward) and left through g
// (Reduce: an all-reduce forward, the identity backward). A block thus
// makes two all-reduces forward and two backward, and the replicated
// parts (LayerNorms, residual stream, dropout outside the attention)
// compute alike on every rank.
//
// # Sequence parallelism
//
// With Group.SeqParallel the replicated parts are split too, by token
// rows: each rank holds its equal block of the N·T rows of a micro-batch
// (Group.SetTokens gives the shape; the rows must cut evenly). f becomes
// GatherRows (an all-gather of the rows forward, a reduce-scatter of the
// gradient backward) and g ScatterRows (a reduce-scatter forward, an
// all-gather backward): they move the same bytes as the all-reduces, and
// each rank keeps only its rows of those activations. The LayerNorms' and row-parallel biases' gradients
// are then each rank's part of the sum: Block.Backward all-reduces them
// (SumPartial), one all-reduce per block.
//
// # Random numbers
//
// RNG keeps the dropout layers' streams, and Dropout draws each row of
// its mask from the layer's key and the row's index in the whole
// activation. A replicated region therefore drops the same elements on
// every rank, a split region (the attention probabilities of the rank's
// heads, the rank's token rows with sequence parallelism) draws only its
// own rows, and the ranks' masks together are the mask of the same model
// on one rank: training with dropout does not depend on the group's size.
// RNG's MarshalBinary and UnmarshalBinary save and restore the streams.
//
// # Failures
//
// Forward and Backward return no error: a collective that fails (a peer
// lost, the context bound by Group.Bind cancelled) panics with an
// nn.Abort whose error wraps the cause, and the driver running the pass
// recovers it with nn.RecoverAbort.
package tp
