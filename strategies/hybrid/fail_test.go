package hybrid_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

// TestPeerKilled: a pipeline stage's rank killed in the middle of a step,
// or a tensor-parallel rank killed between steps while its peers are in
// theirs: every other rank's step fails with ErrPeerLost, and none hangs.
// A rank whose step fails closes its world, as a process that exits on
// the error does, so that the ranks waiting for it learn of it too.
func TestPeerKilled(t *testing.T) {
	cases := []struct {
		name              string
		tp, pp, dp, micro int
		victim            int
		midPipeline       bool
	}{
		{name: "stage-2x2x2", tp: 2, pp: 2, dp: 2, micro: 4, victim: 5, midPipeline: true},
		{name: "stage-1x4x1", tp: 1, pp: 4, dp: 1, micro: 4, victim: 2, midPipeline: true},
		{name: "tp-2x1x2", tp: 2, pp: 1, dp: 2, micro: 2, victim: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.tp * tc.pp * tc.dp
			j := spmdtest.NewJob(t, spmdtest.Mem, n)
			defer j.Close()
			ctx, cancel := context.WithTimeout(context.Background(), spmdtest.Timeout)
			defer cancel()
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r, w := range j.Worlds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = killRun(ctx, w, r == tc.victim, tc.midPipeline, func() { j.Kill(r) },
						hybrid.Config{Model: testModel, TP: tc.tp, PP: tc.pp, DP: tc.dp, Micro: tc.micro, Seed: testSeed, Optimizer: adamw})
					if errs[r] != nil {
						w.Close()
					}
				}()
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatalf("the job hung: %v", ctx.Err())
			}
			for r, err := range errs {
				if r == tc.victim {
					continue
				}
				t.Logf("rank %d: %v", r, err)
				if !errors.Is(err, spmd.ErrPeerLost) {
					t.Errorf("rank %d: %v, want an error wrapping ErrPeerLost", r, err)
				}
			}
		})
	}
}

// killRun trains 3 steps; the victim dies during its second step's third
// pipeline operation, or, without a pipeline, before its second step.
func killRun(ctx context.Context, w *spmd.World, victim, mid bool, kill func(), cfg hybrid.Config) error {
	step, ops := 0, 0
	dead := errors.New("killed")
	if victim && mid {
		cfg.Observe = func(pipe.Event) {
			if ops++; step == 1 && ops > 2 {
				kill()
				panic(dead)
			}
		}
	}
	e, err := hybrid.New(ctx, w.Comm, cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	defer func() {
		if v := recover(); v != nil && v != dead {
			panic(v)
		}
	}()
	for step = 0; step < 3; step++ {
		ops = 0
		if victim && !mid && step == 1 {
			kill()
			return dead
		}
		b := replica(batch(step, testModel.Context), e.Mesh().D, e.Mesh().DP)
		if _, err := e.Step(ctx, b); err != nil {
			return err
		}
	}
	return nil
}
