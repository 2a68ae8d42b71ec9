package hybrid_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

// TestInFlight: the most micro-batches a stage holds at once, counted
// from the operations the executor recorded (forwards run minus
// backwards run), is p - rank for 1F1B and m for GPipe, and the chunk's
// activation slots say the same.
func TestInFlight(t *testing.T) {
	const p, m = 4, 8
	for _, sched := range []string{"1f1b", "gpipe"} {
		t.Run(sched, func(t *testing.T) {
			var mu sync.Mutex
			events := make([][]pipe.Event, p)
			slots := make([]int, p)
			spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
				r := w.Rank()
				cfg := hybrid.Config{Model: testModel, TP: 1, PP: p, DP: 1, Micro: m, Schedule: sched, Seed: testSeed, Optimizer: adamw,
					Observe: func(ev pipe.Event) {
						mu.Lock()
						events[r] = append(events[r], ev)
						mu.Unlock()
					}}
				e, err := hybrid.New(ctx, w.Comm, cfg)
				if err != nil {
					return err
				}
				defer e.Close()
				if _, err := e.Step(ctx, batch(0, testModel.Context)); err != nil {
					return err
				}
				act := e.Parts()[0].Activations()
				if act.SlotBytes <= 0 || act.Peak != int64(act.InFlight)*act.SlotBytes {
					return fmt.Errorf("activations %+v: want slots of some bytes, and the peak their product", act)
				}
				mu.Lock()
				slots[r] = act.InFlight
				mu.Unlock()
				return nil
			})
			for r := range p {
				held, most := 0, 0
				for _, ev := range events[r] {
					if ev.Op.Kind == pipe.Forward {
						held++
					} else {
						held--
					}
					most = max(most, held)
				}
				want := min(p-r, m)
				if sched == "gpipe" {
					want = m
				}
				if most != want || slots[r] != want {
					t.Errorf("stage %d: %d micro-batches in flight by the events, %d activation slots in use at once; want %d", r, most, slots[r], want)
				}
			}
		})
	}
}

// TestDropoutEqualsOneRank: with dropout on, the model split over tensor
// parallelism (and sequence parallelism), pipeline stages and
// data-parallel replicas trains exactly as it does on one rank: the split
// regions' masks, drawn row by row, put together the unsplit masks, and
// the replicas' rows (cut into smaller micro-batches than one rank's) are
// masked as one rank masks them within the whole batch.
func TestDropoutEqualsOneRank(t *testing.T) {
	model := testModel
	model.Dropout = 0.2
	base := hybrid.Config{Model: model, TP: 1, PP: 1, DP: 1, Micro: 2, Seed: testSeed, Optimizer: adamw}
	want := train(t, 1, base)
	for _, tc := range []struct {
		tp, pp, dp int
		seq        bool
		zero       int
	}{{2, 1, 1, false, 0}, {2, 1, 1, true, 0}, {1, 2, 1, false, 0}, {2, 2, 1, true, 0}, {4, 1, 1, false, 0},
		{1, 1, 2, false, 0}, {1, 1, 4, false, 3}, {1, 2, 2, false, 0}, {2, 1, 2, true, 1}} {
		t.Run(fmt.Sprintf("tp%d-pp%d-dp%d-seq=%v-zero%d", tc.tp, tc.pp, tc.dp, tc.seq, tc.zero), func(t *testing.T) {
			cfg := base
			cfg.TP, cfg.PP, cfg.DP, cfg.SeqParallel, cfg.Zero = tc.tp, tc.pp, tc.dp, tc.seq, tc.zero
			got := train(t, tc.tp*tc.pp*tc.dp, cfg)
			if t.Failed() {
				return
			}
			closeTo(t, "losses", got.losses, want.losses, 1e-4)
			closeTo(t, "parameters after 10 steps", got.params, want.params, 1e-4)
		})
	}
	// And dropout does change the training: the masks are not all ones.
	plain := train(t, 1, hybrid.Config{Model: testModel, TP: 1, PP: 1, DP: 1, Micro: 2, Seed: testSeed, Optimizer: adamw})
	if plain.losses[testSteps-1] == want.losses[testSteps-1] {
		t.Errorf("dropout 0.2 trained exactly as no dropout: the masks drop nothing")
	}
}
