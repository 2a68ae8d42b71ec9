// Package plan chooses how to train a GPT-2 style decoder (nn.GPT) on N
// ranks: the automatic-parallelism planner, after MindSpore's strategy
// search and Alpa's cost model. Given the model's shape, the job (ranks,
// ranks per host, global batch, sequence length, memory per rank) and the
// machine's measured constants (GEMM rate, α-β links, memory bandwidth),
// Layouts enumerates every layout of tensor parallelism (TP, Megatron-LM),
// pipeline parallelism (PP: GPipe, 1F1B, interleaved 1F1B) and data
// parallelism (DP, ZeRO stages 0-3) that gorun's engine runs;
// EstimateLayout models one's memory per rank and step time
// (EstimateMemory its memory alone, without a machine); Rank orders
// them, those that fit first, by modelled step time; and Write prints
// the table with the reasons.
//
// # The model
//
// It is a model of gorun's own engine: fp32 parameters, gradients,
// optimizer state and activations (4 bytes a float), AdamW. With C = Dim,
// H = Heads, L = Layers, V = Vocab, T = Seq, p = PP, v = Virtual, m =
// Micro and b = GlobalBatch/DP/m the sequences of a micro-batch:
//
// Parameters. A block has 12C² + 13C; TP splits its four matrices and the
// biases of c_attn and c_fc ((12C² + 7C)/TP a rank) and replicates the
// LayerNorms and the row-parallel biases (6C). The first stage also holds
// wte's vocabulary rows (V·C/TP) and wpe (Context·C, replicated), the last
// the head's vocabulary columns (C·V/TP) and ln_f (2C). A vocabulary TP
// does not divide is cut as prims.Block cuts, the first V mod TP ranks a
// row more; estimates are of TP rank 0, which holds the most.
//
// Memory. Parameters and gradients 4 bytes each, AdamW's m and v 8. ZeRO
// cuts each unit (embeddings, a block, the head) into DP padded chunks:
// stage 1 the optimizer state, 2 also the gradients, 3 also the
// parameters; stages 2 and 3 hold the largest unit's whole gradient as a
// temporary and stage 3 its gathered parameters. Activations, per block
// and in-flight micro-batch, are b·T·C·(Rep + Split/TP) + b·H·T²·Score/TP
// floats (Rep/TP with sequence parallelism; Coeffs, DefaultCoeffs 16, 25,
// 2, to be calibrated against the engine), plus b·T·C·2 for the
// embeddings on the first stage and b·T·V·3/TP for the logits on the
// last. Stage s keeps, in chunks of L/(p·v) blocks: GPipe m; 1F1B
// min(p-s, m); interleaved min(m·v, 2(p-s-1) + (v-1)·p + 1). An estimate
// reports the parts of its most loaded rank (stage 0 or the last).
//
// Step time. A micro-batch on a stage takes its compute, blocks·b·T·3·
// (24C² + 4T·C)/TP FLOPs (forward once, backward twice) plus the head's
// b·T·3·2·C·V/TP on the last stage, over Machine.Flops, plus the work
// every TP rank repeats, blocks·b·T·Machine.Replicated (/TP with sequence
// parallelism); its TP
// communication, 4 ring all-reduces of b·T·C·4 bytes a block
// (2(t-1)α + 2(t-1)/t·n·β each; with sequence parallelism 4 all-gathers
// and 4 reduce-scatters of (t-1)α + (t-1)/t·n·β, the same time), one for
// the embeddings, one for the head's input gradient and the
// vocabulary-parallel cross-entropy's 3 of b·T·4 bytes; and its pipeline
// sends, α + n·β for each activation and gradient of b·T·C·4 bytes (/TP
// with sequence parallelism), v of each when interleaved. With t_mb the
// slowest stage's sum, the pipeline takes (m + (p-1)/v)·t_mb under 1F1B
// and interleaving and (m + p - 1)·t_mb under GPipe, the bubble being
// the (p-1)/v·t_mb or (p-1)·t_mb. Then DP communicates the rank's
// gradients (4 bytes a parameter), not overlapped with compute: one ring
// all-reduce (2(d-1)α + 2(d-1)/d·n·β) for ZeRO 0 and 1 (a reduce-scatter
// and an all-gather), a reduce-scatter each micro-batch and one
// all-gather for ZeRO 2 (as the engine reduces at every micro-batch), and
// a reduce-scatter and two parameter all-gathers each micro-batch for
// ZeRO 3 (1.5·m all-reduces). AdamW reads and writes 28 bytes a
// parameter the rank updates (its ZeRO share from stage 1) over
// Machine.MemBandwidth. Tokens per second are GlobalBatch·T over the step.
//
// Crowded hosts. With more ranks on a host than Machine.Cores, the
// host's cores bound what its ranks compute: the compute and optimizer
// work of all of them (at one rank's speed) over the cores is the least
// the step's compute takes, and since a pipeline's idle stages give
// their cores to the others, the bubble counts only as far as the
// pipeline's span exceeds that bound. Each message inside such a host
// also waits Machine.Wake per rank beyond the cores for its receiver to
// be scheduled (topo's wake-up cost), which falls hardest on TP's many
// small collectives.
//
// Links. The mesh orders ranks TP innermost, then DP, then PP (stage s
// holds ranks s·TP·DP to (s+1)·TP·DP - 1), and ranks fill hosts of
// Job.RanksPerHost in order; a group whose ranks span hosts pays
// Machine's far α and β, else the near ones.
package plan
