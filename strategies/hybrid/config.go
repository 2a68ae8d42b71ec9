package hybrid

import (
	"errors"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"

	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

// Config is how the GPT is split and trained.
type Config struct {
	Model nn.GPTConfig
	// TP, DP and PP are the mesh's sizes; their product is the number of
	// ranks. A DP of 0 takes the ranks left: size / (TP·PP).
	TP, DP, PP int
	// Zero is the ZeRO stage across the data-parallel groups: 0 is DDP.
	// Stages 2 and 3 shard what a pipeline keeps across its micro-batches
	// and need PP 1, as in DeepSpeed.
	Zero int
	// Micro is the number of micro-batches each step's batch is cut into
	// (gradient accumulation; a pipeline keeps them in flight).
	Micro int
	// Schedule is the pipeline's: "gpipe", "1f1b" (the default) or
	// "interleaved", with Virtual chunks per rank. Without a pipeline
	// (PP 1) the micro-batches run one after the other, forward then
	// backward, whatever the schedule.
	Schedule string
	Virtual  int
	// SeqParallel is Megatron's sequence parallelism (tp.Group).
	SeqParallel bool
	// Seed draws the initial weights (the same as nn.NewGPT's at that
	// seed) and the dropout masks.
	Seed uint64
	// Optimizer makes the optimizer of a range [lo, hi) of a chunk's flat
	// layout (nn.NewAdamW).
	Optimizer func(params []*nn.Param, lo, hi int) (nn.Optimizer, error)
	// Observe, if set, sees each pipeline operation as it ran.
	Observe func(pipe.Event)
	// Compress, if set, compresses the gradients' averaging over the
	// data-parallel groups (compress.Parse), at any ZeRO stage: see
	// zero.Config.Compress, and with a pipeline dpSync. With one
	// data-parallel replica it has nothing to do (Engine.CodecActive).
	Compress compress.Codec
}

// Chunks is the number of model chunks: PP·Virtual.
func (c Config) Chunks() int { return c.PP * max(c.Virtual, 1) }

// Validate reports every problem of the configuration for a job of size
// ranks, joined; nil if there is none. It fills DP, Schedule and Virtual
// when they are left zero.
func (c *Config) Validate(size int) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("hybrid: "+format, a...)) }
	if err := c.Model.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.TP < 1 || c.PP < 1 || c.DP < 0 {
		bad("tp %d, pp %d, dp %d: pass sizes of at least 1", c.TP, c.PP, c.DP)
		return errors.Join(errs...)
	}
	switch {
	case c.DP == 0 && size%(c.TP*c.PP) != 0:
		bad("%s %s not split into groups of tp %d x pp %d = %d: pick sizes whose product divides the number of ranks", count(size, "rank"), do(size), c.TP, c.PP, c.TP*c.PP)
	case c.DP == 0:
		c.DP = size / (c.TP * c.PP)
	case c.TP*c.PP*c.DP != size:
		bad("tp %d x pp %d x dp %d is %s, but the job has %d: pick sizes whose product is the number of ranks", c.TP, c.PP, c.DP, count(c.TP*c.PP*c.DP, "rank"), size)
	}
	if c.Schedule == "" {
		c.Schedule = pipe.NameOneFOneB
	}
	if c.Virtual == 0 {
		c.Virtual = 1
	}
	if c.Model.Heads > 0 && c.Model.Heads%c.TP != 0 {
		bad("%s %s not divide over tp %d: pick a tensor-parallel size that divides the heads", count(c.Model.Heads, "head"), do(c.Model.Heads), c.TP)
	}
	if c.Model.Vocab > 0 && c.Model.Vocab < c.TP {
		bad("a vocabulary of %d over tp %d leaves a rank no columns: pick a tensor-parallel size of at most %d", c.Model.Vocab, c.TP, c.Model.Vocab)
	}
	if c.Model.Layers > 0 && c.Model.Layers%c.Chunks() != 0 {
		bad("%s %s not cut into pp %d x virtual %d chunks of equal size: pick sizes that divide the layers", count(c.Model.Layers, "layer"), do(c.Model.Layers), c.PP, c.Virtual)
	}
	if c.PP == 1 && c.Virtual > 1 {
		bad("virtual %d with pp 1: interleaving splits a pipeline's stages into chunks; pass --virtual 1, or a pipeline", c.Virtual)
	}
	if c.Micro < 1 {
		bad("%d micro-batches: pass at least 1", c.Micro)
	}
	if c.Zero < 0 || c.Zero > 3 {
		bad("zero stage %d: pass 0, 1, 2 or 3", c.Zero)
	}
	if c.Zero > 1 && c.PP > 1 {
		bad("zero stage %d with pp %d: stages 2 and 3 shard the gradients and parameters a pipeline keeps across its micro-batches; use zero 0 or 1 with a pipeline (as DeepSpeed does)", c.Zero, c.PP)
	}
	if c.SeqParallel && c.TP == 1 {
		bad("sequence parallelism splits the tensor-parallel group's regions: it needs tp 2 or more")
	}
	if c.Optimizer == nil {
		bad("no optimizer: set Config.Optimizer (nn.NewAdamW)")
	}
	if c.Micro >= 1 && c.PP >= 1 {
		if _, err := pipe.New(c.Schedule, c.PP, c.Micro, c.Virtual); err != nil {
			errs = append(errs, fmt.Errorf("hybrid: %w", err))
		}
	}
	return errors.Join(errs...)
}

// count says "1 layer" or "N layers".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// do is the verb of count(n, ...): "does" or "do".
func do(n int) string {
	if n == 1 {
		return "does"
	}
	return "do"
}
