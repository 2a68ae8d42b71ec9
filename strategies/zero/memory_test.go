package zero_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

// deep is an MLP of 48 equal units (32x32 Linear layers), so that one
// unit's temporaries are small beside the model, as in a real network.
func deep() nn.Model {
	sizes := make([]int, 49)
	for i := range sizes {
		sizes[i] = 32
	}
	sizes[0], sizes[48] = inputs, classes
	return nn.NewMLP(seed, sizes...)
}

// formula is the ZeRO paper's bytes per rank for Psi parameters on n
// ranks with Adam: fp32 4 + 4 + 8 bytes per parameter, mixed precision
// 2 + 2 + 12, of which stage 1 shards the optimizer's part, stage 2 also
// the gradients', stage 3 everything.
func formula(stage int, mixed bool, psi, n float64) float64 {
	p, g, o := 4.0, 4.0, 8.0
	if mixed {
		p, g, o = 2, 2, 12
	}
	switch stage {
	case 1:
		return (p+g)*psi + o*psi/n
	case 2:
		return p*psi + (g+o)*psi/n
	case 3:
		return (p + g + o) * psi / n
	}
	return (p + g + o) * psi
}

// TestMemoryFormulas: what each rank holds equals the formulas within
// 10%, stage by stage, in fp32 and in mixed precision, on 4 ranks: the
// parameters, gradients and optimizer state it keeps, and its peak during
// steps, temporaries included; stage 3's peak exceeds the formula by the
// gathered units only.
func TestMemoryFormulas(t *testing.T) {
	const n = 4
	m := deep()
	psi := float64(len(m.Store().W))
	unitBytes := 0.0
	for _, u := range m.Store().Units {
		unitBytes = max(unitBytes, float64(4*u.Len()))
	}
	var table []string
	for _, mixed := range []bool{false, true} {
		for stage := range 4 {
			label := fmt.Sprintf("stage%d/mixed=%v", stage, mixed)
			mems := make([]zero.Memory, n)
			spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
				z, err := zero.New(ctx, w.Comm, deep(), zero.Config{Stage: stage, Mixed: mixed, Optimizer: adamw})
				if err != nil {
					return err
				}
				defer z.Close()
				s, err := data.NewSampler(examples, globalBatch, w.Rank(), n, seed, true)
				if err != nil {
					return err
				}
				for step := range 3 {
					if _, err := z.Step(ctx, batches(t, s, step, 2)); err != nil {
						return err
					}
				}
				mems[w.Rank()] = z.Memory()
				return nil
			})
			if t.Failed() {
				return
			}
			want := formula(stage, mixed, psi, n)
			for r, mem := range mems {
				kept := float64(mem.Params + mem.Grads + mem.Optim)
				if math.Abs(kept-want) > 0.1*want {
					t.Errorf("%s rank %d: keeps %v (%.0f bytes), formula %.0f", label, r, mem, kept, want)
				}
				peak := float64(mem.Peak)
				if stage < 3 && math.Abs(peak-want) > 0.1*want {
					t.Errorf("%s rank %d: peak %.0f bytes, formula %.0f", label, r, peak, want)
				}
				// Stage 3 gathers a unit and prefetches the next, and
				// keeps a unit's gradients and those in flight.
				if bound := want + (3+zero.DefaultMaxInFlight)*unitBytes; stage == 3 && (peak < kept || peak > bound*1.1) {
					t.Errorf("%s rank %d: peak %.0f bytes, want %.0f to %.0f", label, r, peak, kept, bound)
				}
			}
			table = append(table, fmt.Sprintf("%-20s params %7d grads %7d optim %7d temp %6d peak %7d  formula %7.0f", label, mems[0].Params, mems[0].Grads, mems[0].Optim, mems[0].Temp, mems[0].Peak, want))
		}
	}
	t.Logf("Psi = %.0f parameters, 4 ranks, rank 0:\n%s", psi, strings.Join(table, "\n"))
}

// TestVolume: counted from the trace, a step of stages 1 and 2 moves what
// DDP's all-reduce moves (2Psi elements per rank: a reduce-scatter and an
// all-gather of the model), and a step of stage 3 moves 3Psi (an
// all-gather before forward, another before backward, a reduce-scatter).
func TestVolume(t *testing.T) {
	const n = 4
	psi := float64(len(deep().Store().W))
	for _, tc := range []struct {
		stage int
		want  float64
	}{{0, 2}, {1, 2}, {2, 2}, {3, 3}} {
		// The difference between 3 steps and 1 is 2 steps' traffic, with
		// New's broadcast and checks taken out.
		var vol [2]float64
		for i, k := range []int{1, 3} {
			dir := t.TempDir()
			opt := func(r int) []spmd.Option {
				rec, err := trace.New(dir, trace.Header{Rank: r, Size: n})
				if err != nil {
					t.Fatal(err)
				}
				return []spmd.Option{spmd.WithTrace(rec)}
			}
			ws, _ := spmdtest.Worlds(t, n, opt)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for r, w := range ws {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer w.Close()
					ctx := context.Background()
					z, err := zero.New(ctx, w.Comm, deep(), zero.Config{Stage: tc.stage, Optimizer: adamw})
					if err != nil {
						errs[r] = err
						return
					}
					defer z.Close()
					s, _ := data.NewSampler(examples, globalBatch, r, n, seed, true)
					for step := range k {
						if _, err := z.Step(ctx, batches(t, s, step, 1)); err != nil {
							errs[r] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			f, err := trace.ReadFile(filepath.Join(dir, "rank.0.trace"))
			if err != nil {
				files, _ := filepath.Glob(filepath.Join(dir, "*"))
				t.Fatalf("%v (files %v)", err, files)
			}
			for _, e := range f.Events {
				if e.Kind != trace.CollectiveEvent {
					continue
				}
				switch f.Str(e.Name) {
				case "allreduce":
					vol[i] += 2 * float64(e.Bytes) / 4 // a reduce-scatter and an all-gather
				case "reducescatter", "allgather":
					vol[i] += float64(e.Bytes) / 4
				}
			}
		}
		perStep := (vol[1] - vol[0]) / 2 / psi
		t.Logf("stage %d: %.3f Psi elements per rank per step", tc.stage, perStep)
		if math.Abs(perStep-tc.want) > 0.01*tc.want {
			t.Errorf("stage %d: a step moves %.3f Psi elements per rank, want %g Psi", tc.stage, perStep, tc.want)
		}
	}
}

// killer is a layer without parameters that kills its rank's transport
// the first time it runs at step kill: mid-forward, between two units.
type killer struct {
	nn.ReLU
	step, kill int
	die        func()
}

func (k *killer) Forward(x *nn.Tensor, train bool) *nn.Tensor {
	if k.step++; k.step == k.kill && k.die != nil {
		k.die()
	}
	return k.ReLU.Forward(x, train)
}

// TestRankKilledDuringGather: at stage 3, a rank that dies in the middle
// of a forward pass makes the others fail with ErrPeerLost naming it
// while they gather a unit; nobody hangs.
func TestRankKilledDuringGather(t *testing.T) {
	const n = 3
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
			b := nn.NewBuilder()
			l1 := nn.NewLinear(b.Scope("fc1"), inputs, 32, true)
			l2 := nn.NewLinear(b.Scope("fc2"), 32, 32, true)
			l3 := nn.NewLinear(b.Scope("fc3"), 32, classes, true)
			k := &killer{kill: 4}
			if r == 2 {
				k.die = func() { j.Kill(2) }
			}
			m := nn.NewSequential(b.Build(seed), l1, k, l2, &nn.ReLU{}, l3)
			z, err := zero.New(ctx, w.Comm, m, zero.Config{Stage: 3, Optimizer: adamw})
			if err != nil {
				errs[r] = err
				return
			}
			defer z.Close()
			s, _ := data.NewSampler(examples, globalBatch, r, n, seed, true)
			for step := range steps {
				if _, err := z.Step(ctx, batches(t, s, step, 1)); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for r := range 2 {
		if !errors.Is(errs[r], spmd.ErrPeerLost) || !strings.Contains(errs[r].Error(), "rank 2") || !strings.Contains(errs[r].Error(), "gathering unit") {
			t.Errorf("rank %d: %v, want ErrPeerLost naming rank 2 while gathering a unit", r, errs[r])
		}
	}
	if errs[2] == nil {
		t.Errorf("rank 2 died, yet its step succeeded")
	}
}

// silent is a model that never calls the unit hook.
type silent struct{ m *nn.Sequential }

func (s silent) Store() *nn.Store { return s.m.Store() }
func (s silent) Forward(b *nn.Batch, train bool) (float32, error) {
	st := s.m.Store()
	st.OnUnit(nil)
	defer st.OnUnit(nil)
	return s.m.Forward(b, train)
}
func (s silent) Backward(scale float32) { s.m.Backward(scale) }

// TestModelWithoutUnitHook: a model that does not call the unit hook is
// an error at its first step, not silent training on local gradients.
func TestModelWithoutUnitHook(t *testing.T) {
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		z, err := zero.New(ctx, w.Comm, silent{newMLP().(*nn.Sequential)}, zero.Config{Stage: 1, Optimizer: adamw})
		if err != nil {
			return err
		}
		defer z.Close()
		s, _ := data.NewSampler(examples, globalBatch, w.Rank(), 2, seed, true)
		_, err = z.Step(ctx, batches(t, s, 0, 1))
		if err == nil || !strings.Contains(err.Error(), "unit hook") {
			t.Errorf("rank %d: %v, want an error about the unit hook", w.Rank(), err)
		}
		return nil
	})
}
