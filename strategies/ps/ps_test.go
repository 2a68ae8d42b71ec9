package ps_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
	"github.com/gorun-hpc/gorun/strategies/ps"
)

const (
	inputs, classes = 12, 5
	examples        = 480
	globalBatch     = 24
	seed            = 7
)

func newModel() nn.Model { return nn.NewMLP(seed, inputs, 32, 24, classes) }

func newOpt(params []*nn.Param, lo, hi int) (nn.Optimizer, error) {
	return nn.NewSGD(nn.SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-3}, params, lo, hi)
}

var (
	setOnce sync.Once
	set     *data.Classification
)

func batch(t testing.TB, s *data.Sampler, step int) []*nn.Batch {
	setOnce.Do(func() {
		var err error
		if set, err = data.Synthetic(examples, inputs, classes, seed); err != nil {
			t.Fatal(err)
		}
	})
	idx := s.Local(step)
	b := &nn.Batch{N: len(idx), XDim: inputs, X: make([]float32, len(idx)*inputs), Y: make([]int32, len(idx))}
	if err := set.Batch(idx, b.X, b.Y); err != nil {
		t.Fatal(err)
	}
	return []*nn.Batch{b}
}

// result is the losses a run reported per step and its final parameters.
type result struct {
	losses []float32
	params []float32
}

// trainPS runs a parameter-server job of n ranks, servers of them serving;
// slow, if not negative, is a worker that sleeps each step. It returns the
// losses server 0 reported and worker 0's final parameters, and checks the
// staleness bound on every rank.
func trainPS(t *testing.T, n, servers, staleness, steps, slow int) result {
	var res result
	var mu sync.Mutex
	spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
		m := newModel()
		d, err := ps.New(ctx, w.Comm, m, ps.Config{Servers: servers, Staleness: staleness, Steps: steps}, newOpt)
		if err != nil {
			return err
		}
		defer d.Close()
		if d.IsServer() {
			err := d.Serve(ctx, func(step int, loss float32) {
				if w.Rank() == 0 {
					res.losses = append(res.losses, loss)
				}
			})
			if lead := d.MaxLead(); lead > staleness+1 {
				return fmt.Errorf("a worker's pushes led the applied steps by %d, bound %d", lead, staleness+1)
			}
			return err
		}
		s, err := data.NewSampler(examples, globalBatch, d.Worker(), d.Workers(), seed, true)
		if err != nil {
			return err
		}
		for step := range steps {
			if d.Worker() == slow {
				time.Sleep(2 * time.Millisecond)
			}
			if _, err := d.Step(ctx, batch(t, s, step)); err != nil {
				return err
			}
		}
		if st := d.Staleness(); st > staleness {
			return fmt.Errorf("worker %d computed from parameters %d steps old, bound %d", d.Worker(), st, staleness)
		}
		if d.Worker() == 0 {
			mu.Lock()
			res.params = append([]float32(nil), m.Store().W...)
			mu.Unlock()
		}
		return nil
	})
	return res
}

// trainDDP runs DDP on n ranks and returns rank 0's losses and parameters.
func trainDDP(t *testing.T, n, steps int) result {
	var res result
	spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
		m := newModel()
		d, err := dp.New(ctx, w.Comm, m, dp.Config{})
		if err != nil {
			return err
		}
		defer d.Close()
		st := m.Store()
		opt, err := newOpt(st.Params, 0, len(st.W))
		if err != nil {
			return err
		}
		s, err := data.NewSampler(examples, globalBatch, w.Rank(), n, seed, true)
		if err != nil {
			return err
		}
		for step := range steps {
			loss, err := d.Step(ctx, batch(t, s, step), opt)
			if err == nil {
				loss, err = d.MeanLoss(ctx, loss)
			}
			if err != nil {
				return err
			}
			if w.Rank() == 0 {
				res.losses = append(res.losses, loss)
			}
		}
		if w.Rank() == 0 {
			res.params = append([]float32(nil), st.W...)
		}
		return nil
	})
	return res
}

func same(t *testing.T, label string, got, want result) {
	t.Helper()
	if len(got.losses) != len(want.losses) {
		t.Fatalf("%s: %d steps reported, want %d", label, len(got.losses), len(want.losses))
	}
	for i := range want.losses {
		if d := math.Abs(float64(got.losses[i] - want.losses[i])); d > 1e-5*math.Abs(float64(want.losses[i])) {
			t.Errorf("%s: step %d loss %.8f, want %.8f", label, i+1, got.losses[i], want.losses[i])
		}
	}
	var diff, norm float64
	for i, w := range want.params {
		d := float64(got.params[i] - w)
		diff, norm = diff+d*d, norm+float64(w)*float64(w)
	}
	if rel := math.Sqrt(diff / norm); rel > 1e-5 {
		t.Errorf("%s: parameters differ by %.3g relative", label, rel)
	}
}

// TestSyncEqualsDDP: with staleness 0 the parameter server trains as DDP
// does with as many ranks as it has workers, for 1 and 2 servers.
func TestSyncEqualsDDP(t *testing.T) {
	const steps = 20
	for _, c := range []struct{ servers, workers int }{{1, 2}, {2, 2}, {2, 3}, {1, 4}} {
		t.Run(fmt.Sprintf("servers=%d/workers=%d", c.servers, c.workers), func(t *testing.T) {
			want := trainDDP(t, c.workers, steps)
			same(t, "sync ps", trainPS(t, c.servers+c.workers, c.servers, 0, steps, -1), want)
			// Timing must not matter at staleness 0: a slowed worker
			// changes nothing.
			same(t, "sync ps, one worker slowed", trainPS(t, c.servers+c.workers, c.servers, 0, steps, 0), want)
		})
	}
}

// TestAsyncConverges: with staleness 2 and one slowed worker the others run
// ahead (within the bound, which trainPS checks) and the loss still falls.
func TestAsyncConverges(t *testing.T) {
	const steps = 60
	res := trainPS(t, 4, 1, 2, steps, 1)
	first, last := mean(res.losses[:5]), mean(res.losses[steps-5:])
	if !(last < 0.5*first) {
		t.Errorf("loss went from %.4f to %.4f over %d steps, want it at least halved", first, last, steps)
	}
}

func mean(v []float32) float32 {
	var s float32
	for _, x := range v {
		s += x
	}
	return s / float32(len(v))
}

// TestBadConfig: every rank gets an error that says what to pass.
func TestBadConfig(t *testing.T) {
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		for _, cfg := range []ps.Config{{Servers: 0}, {Servers: 2}, {Servers: 1, Staleness: -1}} {
			if _, err := ps.New(ctx, w.Comm, newModel(), cfg, newOpt); err == nil {
				return fmt.Errorf("config %+v accepted", cfg)
			}
		}
		return nil
	})
}

// TestWorkerKilled: a worker that dies makes the server fail with
// ErrPeerLost naming it, and the other worker fail too; nobody hangs.
func TestWorkerKilled(t *testing.T) {
	j := spmdtest.NewJob(t, spmdtest.Mem, 3)
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), spmdtest.Timeout)
	defer cancel()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r, w := range j.Worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := ps.New(ctx, w.Comm, newModel(), ps.Config{Servers: 1, Steps: 20}, newOpt)
			if err != nil {
				errs[r] = err
				return
			}
			if d.IsServer() {
				errs[r] = d.Serve(ctx, nil)
				if errs[r] != nil {
					w.Close() // as a failed process would exit
				}
				return
			}
			s, _ := data.NewSampler(examples, globalBatch, d.Worker(), d.Workers(), seed, true)
			for step := range 20 {
				if r == 2 && step == 5 {
					j.Kill(2)
					return
				}
				if _, errs[r] = d.Step(ctx, batch(t, s, step)); errs[r] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if !errors.Is(errs[0], spmd.ErrPeerLost) || !strings.Contains(errs[0].Error(), "rank 2") {
		t.Errorf("server: %v, want ErrPeerLost naming rank 2", errs[0])
	}
	if errs[1] == nil {
		t.Errorf("the surviving worker finished 20 steps without its server")
	}
}
