// Package pipe holds the schedules of pipeline parallelism: the order in
// which each stage of a pipeline runs the forward and backward passes of
// the micro-batches of one training step. It computes, and does not
// communicate; the executor runs a Schedule's ops.
//
// GPipe (Huang et al. 2019) runs all forwards, then all backwards, and
// holds every micro-batch's activations. OneFOneB (PipeDream-Flush,
// Narayanan et al. 2021; Megatron-LM's non-interleaved schedule) starts
// backwards as soon as it can, so stage r holds at most p-r activations
// for the same bubble. Interleaved (Megatron-LM, Narayanan et al. 2021)
// gives each stage v chunks of the model, r, r+p, r+2p, ..., which cuts
// the bubble by v for more communication and activations.
//
// Validate checks that a schedule runs each op once on the right rank
// and cannot deadlock; Simulate times it under given costs, and Bubble
// and IdealBubble give the idle share it has and the papers' formula.
// Draw prints it as the papers' figures do.
package pipe
