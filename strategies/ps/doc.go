// Package ps is the parameter-server architecture: the first K ranks of a
// communicator are servers, each owning a contiguous shard of the model's
// flat parameter buffer and the optimizer state of that shard; the other
// ranks are workers, which compute gradients on their slices of the
// global batch, push each server its shard of them, and pull the updated
// shard back.
//
// A server applies step t once it holds every worker's gradient for step
// t: it sums them in worker order (so that results do not depend on which
// arrived first), divides by the number of workers and runs its optimizer
// on its shard. Its reply to a worker carries the shard and its version,
// the number of steps applied.
//
// Staleness bounds how far the fastest worker may run ahead (the stale
// synchronous parallel model). A worker that has pushed step t gets its
// reply once the server has applied at least t+1-s steps, so the gradient
// of its step t+1 is computed from parameters at most s steps old. With
// s = 0 every worker waits for every step: synchronous training, equal to
// data parallelism with the same global batch. With s > 0 a slow worker
// holds the others back only once they are s steps ahead.
//
// Messages go over the driver's own duplicate of the communicator: a push
// is the worker's mean loss (8 bytes) then the gradient shard; a reply is
// the version (8 bytes) then the parameter shard.
package ps
