// Command server is the server program of the parameter-server example as
// an MPMD job (see examples/ps): its ranks, the job's first, hold the
// parameters and the optimizer, shard by shard, for the workers of
// examples/ps/worker that follow them.
//
//	gorun -np 2 ./examples/ps/server --steps 100 : -np 4 ./examples/ps/worker --steps 100
//
// The ranks learn how many serve from one another, and fail at start, on
// every rank, when a worker comes before a server, when either program is
// missing, or when the programs' training flags differ. Rank 0 prints one
// line per step, "step N loss L samples/s S", and "final loss L".
package main

import (
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/examples/ps/internal/train"
)

func main() { workload.Main("ps server", train.Parser(train.Server), train.Run) }
