// Command worker is the worker program of the parameter-server example as
// an MPMD job (see examples/ps): its ranks, after those of
// examples/ps/server, compute gradients on their slices of each global
// batch, push them to the servers and pull the updated parameters.
//
//	gorun -np 1 ./examples/ps/server --staleness 2 : -np 3 ./examples/ps/worker --staleness 2 --slow-worker 1
//
// It takes the server's training flags, which must be the same, and
// --slow-worker and --slow-delay.
package main

import (
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/examples/ps/internal/train"
)

func main() { workload.Main("ps worker", train.Parser(train.Worker), train.Run) }
