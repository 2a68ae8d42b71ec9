// Package zero trains a model with sharded data parallelism: ZeRO's
// stages 1-3 (Rajbhandari et al. 2019) and PyTorch FSDP's sharding
// strategies, over the units of an nn model (nn.Unit: a layer, a
// transformer block).
//
// Stage 1 keeps each rank's part of the optimizer's state, stage 2 also
// of the gradients, stage 3 also of the parameters, which each unit
// gathers just before it runs (the next unit's gather prefetched while
// it computes) and frees after. Stage 0 is DDP's replication on the same
// machinery. Hybrid sharding shards within each host and replicates
// across hosts; mixed precision keeps bf16 parameters and gradients with
// fp32 master weights and optimizer state. Memory reports the bytes each
// rank holds, and Save and Load write and read sharded checkpoints that
// load at any world size.
package zero
