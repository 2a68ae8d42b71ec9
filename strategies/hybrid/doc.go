// Package hybrid trains a GPT with tensor, pipeline and data parallelism
// at once: Megatron-LM's TP x PP x DP mesh.
//
// The ranks form a mesh (Mesh), tensor parallelism innermost so that a
// tensor-parallel group's ranks are consecutive and share a host, then
// data parallelism, then pipeline stages. The model's blocks are cut into
// PP·Virtual chunks of equal size (Part), each built of strategies/tp's
// layers on the rank's tensor-parallel group, with nn.GPT's parameter
// names and, pasted together, nn.NewGPT's initial weights. Engine.Step
// runs one optimizer step:
//
//   - With a pipeline (PP > 1) strategies/pipe runs the schedule (GPipe,
//     1F1B or interleaved 1F1B) over the step's micro-batches, sending
//     activations and their gradients between neighbouring stages; a chunk
//     keeps one copy of its layers (an activation slot) per micro-batch in
//     flight. Then each chunk's gradients are averaged over the
//     data-parallel group, by an all-reduce (ZeRO stage 0, DDP) or a
//     reduce-scatter, the optimizer step on the replica's block and an
//     all-gather (stage 1).
//   - Without one (PP 1) the rank's part is the whole model, an nn.Model,
//     which strategies/zero runs over the data-parallel group at any ZeRO
//     stage (its stage 0 is DDP), overlapping its collectives with the
//     passes through the model's unit hooks.
//
// The mathematics of the split model is the unsplit one: trained on any
// mesh, the GPT's losses and parameters equal nn.GPT's trained on one
// rank within float32 rounding, and with dropout on the mesh equals one
// rank running this package on the step's whole batch (tp's row-keyed
// dropout, keyed once per step, masking the rows of the whole batch:
// each replica's batch says where it sits in it, nn.Batch.First).
//
// Engine.Save writes a sharded checkpoint (strategies/nn/shardckpt) in
// which each rank keeps what it owns: its tensor-parallel shards of its
// chunks' parameters, its optimizer state, its random streams and, with
// a codec that keeps state (error feedback), that codec's state; rank 0
// commits it atomically. Engine.Load reads one on the same mesh and
// model only (resharding is not done here), and with the same codec if
// it carries codec state, and the engine then trains bit for bit as one
// that never stopped.
//
// The subpackage plan ranks the layouts of a job by modelled step time
// among those that fit in memory.
package hybrid
