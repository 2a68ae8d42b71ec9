package train

import (
	"flag"
	"fmt"
	"time"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
)

// Role is what a program is in the job.
type Role int

// The roles. A program of role Server or Worker is one side of an MPMD job;
// ByRank is the one program of an SPMD job.
const (
	ByRank Role = iota // every rank runs it: the first Config.Servers ranks serve
	Server
	Worker
)

func (r Role) String() string {
	switch r {
	case ByRank:
		return "ps"
	case Server:
		return "server"
	case Worker:
		return "worker"
	}
	return fmt.Sprintf("role %d", int(r))
}

// Config is the flags of one of the programs.
type Config struct {
	workload.Config
	Role      Role
	Servers   int // ByRank: how many ranks serve
	Staleness int
	Slow      int           // a worker's index that sleeps Delay each step; -1: none
	Delay     time.Duration // how long Slow sleeps
}

// Parser returns the flag parser of the program of role: the training
// flags (workload's and --staleness) for every program; --servers for
// ByRank; --slow-worker and --slow-delay where workers run.
func Parser(role Role) func(fs *flag.FlagSet, args []string) (Config, error) {
	return func(fs *flag.FlagSet, args []string) (Config, error) {
		cfg := Config{Config: workload.DefaultConfig(), Role: role, Servers: 1, Slow: -1, Delay: 20 * time.Millisecond}
		cfg.register(fs)
		if role == ByRank {
			fs.IntVar(&cfg.Servers, "servers", cfg.Servers, "how many ranks (the first ones) serve parameters")
		}
		if role != Server {
			fs.IntVar(&cfg.Slow, "slow-worker", cfg.Slow, "for experiments: this worker (0-based among workers) sleeps --slow-delay each step")
			fs.DurationVar(&cfg.Delay, "slow-delay", cfg.Delay, "how long --slow-worker sleeps each step")
		}
		if err := workload.Parse(fs, args, about[role]); err != nil {
			return cfg, err
		}
		switch {
		case cfg.Servers < 1:
			return cfg, fmt.Errorf("--servers %d: want 1 or more", cfg.Servers)
		case cfg.Staleness < 0:
			return cfg, fmt.Errorf("--staleness %d: want 0 (synchronous) or more", cfg.Staleness)
		case cfg.Slow < -1:
			return cfg, fmt.Errorf("--slow-worker %d: want a worker, 0 or more (0-based among the workers), or -1 for none", cfg.Slow)
		case cfg.Delay < 0:
			return cfg, fmt.Errorf("--slow-delay %v: want 0 or more", cfg.Delay)
		}
		return cfg, nil
	}
}

// about is what --help says before the flags, by role.
var about = map[Role]string{
	ByRank: `ps trains a model with a parameter server (strategies/ps): the first --servers
ranks hold the parameters and the optimizer, the others are workers that split
each global batch.

  gorun -np N ./examples/ps --servers S [flags]`,
	Server: `server is the parameter-server example's server program, for an MPMD job:
its ranks come first and hold the parameters and the optimizer.

  ` + usage,
	Worker: `worker is the parameter-server example's worker program, for an MPMD job:
its ranks follow the servers' and split each global batch.

  ` + usage,
}

// checkWorkers says whether the flags fit a job of workers workers: the
// global batch splits over them, and --slow-worker is one of them.
func (c Config) checkWorkers(workers int) error {
	if err := c.CheckBatch(workers, "worker"); err != nil {
		return err
	}
	if c.Slow >= workers {
		return fmt.Errorf("--slow-worker %d: the job has %d workers: pass 0 to %d (0-based among the workers), or -1 for none", c.Slow, workers, workers-1)
	}
	return nil
}

// register adds the training flags, those every program of a job must
// agree on, to fs, with c's values as defaults.
func (c *Config) register(fs *flag.FlagSet) {
	c.Config.Register(fs)
	fs.IntVar(&c.Staleness, "staleness", c.Staleness, "steps a worker may run ahead of the slowest (0: synchronous)")
}

// trainingFlags lists the training flags as set, "--name=value" sorted by
// name (with --servers for ByRank): what the ranks of a job compare.
func (c Config) trainingFlags() []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	c.register(fs) // defaults are c's values
	if c.Role == ByRank {
		fs.Int("servers", c.Servers, "")
	}
	var kv []string
	fs.VisitAll(func(f *flag.Flag) { kv = append(kv, "--"+f.Name+"="+f.Value.String()) })
	return kv
}
