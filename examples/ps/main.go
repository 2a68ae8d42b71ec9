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
// Rank 0 (a server) prints one line per step, "step N loss L samples/s S",
// the loss being the mean over the workers, and "final loss L".
package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
)

func main() { workload.Main("ps", parseFlags, run) }

type config struct {
	workload.Config
	servers   int
	staleness int
	slow      int
	delay     time.Duration
}

func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	cfg := config{Config: workload.DefaultConfig(), servers: 1}
	cfg.Register(fs)
	fs.IntVar(&cfg.servers, "servers", cfg.servers, "how many ranks (the first ones) serve parameters")
	fs.IntVar(&cfg.staleness, "staleness", 0, "steps a worker may run ahead of the slowest (0: synchronous)")
	fs.IntVar(&cfg.slow, "slow-worker", -1, "for experiments: this worker (0-based among workers) sleeps --slow-delay each step")
	fs.DurationVar(&cfg.delay, "slow-delay", 20*time.Millisecond, "how long --slow-worker sleeps each step")
	if err := workload.Parse(fs, args); err != nil {
		return cfg, err
	}
	switch {
	case cfg.servers < 1:
		return cfg, fmt.Errorf("--servers %d: want 1 or more", cfg.servers)
	case cfg.staleness < 0:
		return cfg, fmt.Errorf("--staleness %d: want 0 (synchronous) or more", cfg.staleness)
	}
	return cfg, nil
}
