// Command ps trains a model with the parameter-server architecture
// (strategies/ps): the first --servers ranks hold the parameters and the
// optimizer, shard by shard; the other ranks are workers that compute
// gradients on their slices of each global batch, push them and pull the
// updated parameters. --staleness S lets a worker run up to S steps ahead
// of the slowest (0: synchronous, which trains exactly as data
// parallelism does).
//
//	gorun -np 4 ./examples/ps --servers 1 --steps 100
//	gorun -np 6 ./examples/ps --servers 2 --staleness 2 --batch 128
//	go run ./examples/ps --steps 20     # alone: no servers, local training
//
// Servers and workers can also run as separate programs of one MPMD job,
// as TensorFlow's ps and worker jobs do: examples/ps/server and
// examples/ps/worker, the servers first, each with the same training
// flags (all but --servers, --slow-worker and --slow-delay), which they
// check at start. The same seed and shape train the same as this program:
//
//	gorun -np 1 ./examples/ps/server --steps 100 : -np 3 ./examples/ps/worker --steps 100
//
// --batch is the global batch, split evenly over the workers, as over
// examples/ddp's ranks; by default 64 rounded down to a multiple of the
// workers x --accum (63 for 3 workers), or workers x --accum where that is
// more (after a "note:" line), so the commands above run as written. A --batch given that does not split is an error.
//
// Rank 0 (a server) prints one line per step, "step N loss L samples/s S"
// (N from 1), the loss being the mean over the workers, and "final loss L".
package main

import (
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/examples/ps/internal/train"
)

func main() { workload.Main("ps", train.Parser(train.ByRank), train.Run) }
