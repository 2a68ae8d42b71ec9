package zero

import (
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Config says what a driver shards and how it computes.
type Config struct {
	// Stage is ZeRO's stage: 0 shards nothing (DDP, FSDP's NO_SHARD); 1
	// shards the optimizer's state; 2 also the gradients (SHARD_GRAD_OP);
	// 3 also the parameters (FULL_SHARD).
	Stage int
	// Hybrid shards within each host and replicates across hosts (FSDP's
	// HYBRID_SHARD): the gathers stay on the host's shared memory and only
	// the gradients' reductions cross the network. The hosts are those
	// the rendezvous reported (topo.Detect); every host must run as many
	// ranks.
	Hybrid bool
	// Mixed keeps parameters and gradients in bfloat16, with an fp32
	// master copy of the parameters and fp32 optimizer state: 2 + 2 + 12
	// bytes per parameter with Adam, against 4 + 4 + 8 in fp32. The layers
	// still compute in fp32, on a copy of one unit at a time.
	Mixed bool
	// NoPrefetch turns off stage 3's prefetch: each unit's parameters are
	// gathered when the unit runs, not while the one before it computes.
	NoPrefetch bool
	// Optimizer makes the optimizer of one range [lo, hi) of the model's
	// flat layout, over the parameters that hold it (nn.NewAdamW,
	// nn.NewSGD). The driver makes one for each unit's part on this rank.
	Optimizer func(params []*nn.Param, lo, hi int) (nn.Optimizer, error)
	// MaxInFlight bounds the gradient reductions a rank keeps in flight,
	// each holding a unit's gradients (DefaultMaxInFlight when 0).
	MaxInFlight int
	// Compress, if set, compresses the gradients' reductions (compress.Parse):
	// a codec that reduce-scatters in its own format (fp16, bf16) does so
	// over the shard group; any other all-reduces the unit in its format and
	// keeps the rank's chunk. With Hybrid only the all-reduce across hosts
	// is compressed, the host's reduce-scatter stays exact (on one host
	// nothing is: CodecActive). Not with Mixed,
	// whose gradients are bfloat16 already.
	Compress compress.Codec
}

// DefaultMaxInFlight is the number of units' gradient reductions a rank
// keeps in flight before it waits for the oldest.
const DefaultMaxInFlight = 2

// Shard is FSDP's name for a sharding strategy.
type Shard string

// FSDP's sharding strategies, as examples/zero's --shard takes them.
const (
	FullShard   Shard = "full"    // FULL_SHARD: stage 3
	ShardGradOp Shard = "grad-op" // SHARD_GRAD_OP: stage 2
	NoShard     Shard = "none"    // NO_SHARD: stage 0, DDP
	HybridShard Shard = "hybrid"  // HYBRID_SHARD: stage 3 within each host, replicated across hosts
)

// Apply sets cfg's stage (and Hybrid) from FSDP's strategy.
func (s Shard) Apply(cfg *Config) error {
	switch s {
	case FullShard:
		cfg.Stage = 3
	case ShardGradOp:
		cfg.Stage = 2
	case NoShard:
		cfg.Stage = 0
	case HybridShard:
		cfg.Stage, cfg.Hybrid = 3, true
	default:
		return fmt.Errorf("sharding %q: want full, grad-op, none or hybrid", string(s))
	}
	return nil
}

func (c Config) check() error {
	switch {
	case c.Stage < 0 || c.Stage > 3:
		return fmt.Errorf("zero: stage %d: want 0, 1, 2 or 3", c.Stage)
	case c.Optimizer == nil:
		return fmt.Errorf("zero: Config.Optimizer is nil: pass a function that makes the optimizer of a range (nn.NewAdamW)")
	case c.Compress != nil && c.Mixed:
		return fmt.Errorf("zero: compression %s with Mixed: mixed precision reduces bfloat16 gradients already; drop one of them", c.Compress.Name())
	case c.MaxInFlight < 0:
		return fmt.Errorf("zero: MaxInFlight %d: want 0 (the default) or more", c.MaxInFlight)
	}
	return nil
}

// String names the configuration as the examples print it.
func (c Config) String() string {
	s := fmt.Sprintf("zero-%d", c.Stage)
	if c.Hybrid {
		s += " hybrid"
	}
	if c.Mixed {
		s += " bf16"
	}
	if c.Stage == 3 && c.NoPrefetch {
		s += " no-prefetch"
	}
	if c.Compress != nil {
		s += " " + c.Compress.Name()
	}
	return s
}
