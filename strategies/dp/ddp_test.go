package dp_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// The test job: a small MLP on a synthetic set, global batch 24 (which
// splits over 1, 2, 3 and 4 ranks and into 2 micro-batches), 20 steps.
const (
	inputs, classes = 12, 5
	examples        = 480
	globalBatch     = 24
	steps           = 20
	seed            = 7
)

func newModel() nn.Model { return nn.NewMLP(seed, inputs, 32, 24, classes) }

func newOpt(t testing.TB, st *nn.Store) nn.Optimizer {
	o, err := nn.NewSGD(nn.SGDConfig{LR: 0.1, Momentum: 0.9, WeightDecay: 1e-3}, st.Params, 0, len(st.W))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

var (
	setOnce sync.Once
	set     *data.Classification
)

func dataset(t testing.TB) *data.Classification {
	setOnce.Do(func() {
		var err error
		if set, err = data.Synthetic(examples, inputs, classes, seed); err != nil {
			t.Fatal(err)
		}
	})
	return set
}

// batches returns rank's accum micro-batches of step.
func batches(t testing.TB, s *data.Sampler, step, accum int) []*nn.Batch {
	var out []*nn.Batch
	for i := range accum {
		idx, err := s.Micro(step, accum, i)
		if err != nil {
			t.Fatal(err)
		}
		b := &nn.Batch{N: len(idx), XDim: inputs, X: make([]float32, len(idx)*inputs), Y: make([]int32, len(idx))}
		if err := dataset(t).Batch(idx, b.X, b.Y); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// run is one training run's record.
type run struct {
	losses []float32
	params []float32
}

// reference trains in one process with the whole global batch.
func reference(t testing.TB, newModel func() nn.Model) run {
	m := newModel()
	st := m.Store()
	opt := newOpt(t, st)
	s, err := data.NewSampler(examples, globalBatch, 0, 1, seed, true)
	if err != nil {
		t.Fatal(err)
	}
	var r run
	for step := range steps {
		st.ZeroGrads()
		b := batches(t, s, step, 1)[0]
		loss, err := m.Forward(b, true)
		if err != nil {
			t.Fatal(err)
		}
		m.Backward(1)
		opt.Step(st.W, st.G)
		r.losses = append(r.losses, loss)
	}
	r.params = append([]float32(nil), st.W...)
	return r
}

// train runs DDP on c and returns what rank 0 of c saw.
func train(ctx context.Context, t testing.TB, c *spmd.Comm, newModel func() nn.Model, cfg dp.Config, accum int) (run, error) {
	m := newModel()
	d, err := dp.New(ctx, c, m, cfg)
	if err != nil {
		return run{}, err
	}
	defer d.Close()
	opt := newOpt(t, m.Store())
	s, err := data.NewSampler(examples, globalBatch, c.Rank(), c.Size(), seed, true)
	if err != nil {
		return run{}, err
	}
	var r run
	for step := range steps {
		loss, err := d.Step(ctx, batches(t, s, step, accum), opt)
		if err != nil {
			return run{}, err
		}
		if loss, err = d.MeanLoss(ctx, loss); err != nil {
			return run{}, err
		}
		r.losses = append(r.losses, loss)
	}
	r.params = append([]float32(nil), m.Store().W...)
	return r, nil
}

// same fails t unless got matches want within 1e-5 relative, step by step.
func same(t *testing.T, label string, got, want run) {
	t.Helper()
	for i := range want.losses {
		if d := math.Abs(float64(got.losses[i] - want.losses[i])); d > 1e-5*math.Abs(float64(want.losses[i])) {
			t.Errorf("%s: step %d loss %.8f, single process %.8f", label, i+1, got.losses[i], want.losses[i])
		}
	}
	var diff, norm float64
	for i, w := range want.params {
		d := float64(got.params[i] - w)
		diff += d * d
		norm += float64(w) * float64(w)
	}
	if rel := math.Sqrt(diff / norm); rel > 1e-5 {
		t.Errorf("%s: parameters differ from single process by %.3g relative", label, rel)
	}
}

// TestEqualsOneProcess: DDP with global batch B on 1-4 ranks trains as one
// process with batch B, over each transport, with accumulation, with many
// small buckets and with one bucket.
func TestEqualsOneProcess(t *testing.T) {
	want := reference(t, newModel)
	cases := []struct {
		name  string
		kinds []spmdtest.Kind
		cfg   dp.Config
		accum int
	}{
		{"default", spmdtest.Kinds, dp.Config{}, 1},
		{"accum2", []spmdtest.Kind{spmdtest.Mem}, dp.Config{}, 2},
		{"1KiB-buckets", []spmdtest.Kind{spmdtest.Mem, spmdtest.SHM}, dp.Config{BucketCap: 1 << 10}, 1},
		{"one-bucket", []spmdtest.Kind{spmdtest.Mem}, dp.Config{BucketCap: 1 << 30, FirstBucket: 1 << 30}, 1},
	}
	for _, tc := range cases {
		for _, kind := range tc.kinds {
			for n := 1; n <= 4; n++ {
				label := fmt.Sprintf("%s/%s/np=%d", tc.name, kind, n)
				t.Run(label, func(t *testing.T) {
					var got run
					spmdtest.RunOn(t, kind, n, func(ctx context.Context, w *spmd.World) error {
						r, err := train(ctx, t, w.Comm, newModel, tc.cfg, tc.accum)
						if w.Rank() == 0 {
							got = r
						}
						return err
					})
					if !t.Failed() {
						same(t, label, got, want)
					}
				})
			}
		}
	}
}

// TestLayerParts: layers large enough that Linear reports their weights'
// gradients row block by row block, and buckets that cut those weights,
// still train as one process.
func TestLayerParts(t *testing.T) {
	wide := func() nn.Model { return nn.NewMLP(seed, inputs, 600, 500, classes) }
	want := reference(t, wide)
	for _, n := range []int{2, 3} {
		var got run
		spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
			r, err := train(ctx, t, w.Comm, wide, dp.Config{BucketCap: 200 << 10, FirstBucket: 64 << 10}, 1)
			if w.Rank() == 0 {
				got = r
			}
			return err
		})
		same(t, fmt.Sprintf("np %d", n), got, want)
	}
}

// TestSubCommunicator: two DDP groups of two ranks each train side by side
// on halves of a world of four, each equal to one process.
func TestSubCommunicator(t *testing.T) {
	want := reference(t, newModel)
	got := make([]run, 4)
	spmdtest.Run(t, 4, func(ctx context.Context, w *spmd.World) error {
		sub, err := w.Comm.Split(ctx, w.Rank()%2, w.Rank())
		if err != nil {
			return err
		}
		defer sub.Free()
		got[w.Rank()], err = train(ctx, t, sub, newModel, dp.Config{BucketCap: 4 << 10}, 1)
		return err
	})
	for r := 0; r < 2; r++ {
		same(t, fmt.Sprintf("group of rank %d", r), got[r], want)
	}
}

// TestBucketsSpanBuffer: the buckets tile the gradient buffer from the top
// down, none over its cap (a parameter larger than the cap is cut), the
// first at most the first bucket's size.
func TestBucketsSpanBuffer(t *testing.T) {
	spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
		m := nn.NewMLP(1, 100, 64, 64, 10) // weights of 25.6, 16 and 2.5 KiB
		d, err := dp.New(ctx, w.Comm, m, dp.Config{BucketCap: 20 << 10, FirstBucket: 4 << 10})
		if err != nil {
			return err
		}
		defer d.Close()
		bs := d.Buckets()
		at := len(m.Store().G)
		for i, b := range bs {
			if b.Hi != at || b.Lo >= b.Hi || len(b.Grads) != b.Hi-b.Lo {
				return fmt.Errorf("bucket %d is [%d, %d), want it to end at %d", i, b.Lo, b.Hi, at)
			}
			limit := 20 << 10
			if i == 0 {
				limit = 4 << 10
			}
			if (b.Hi-b.Lo)*4 > limit {
				return fmt.Errorf("bucket %d holds %d bytes in %d parameters, over its cap %d", i, (b.Hi-b.Lo)*4, len(b.Params), limit)
			}
			at = b.Lo
		}
		if at != 0 || len(bs) < 4 {
			return fmt.Errorf("%d buckets end at %d, want several covering the buffer", len(bs), at)
		}
		return nil
	})
}

// TestOverlap: a bucket's reduction is issued, and with small buckets
// completes, before backward ends (an order of events, not a timing).
func TestOverlap(t *testing.T) {
	spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
		var mu sync.Mutex
		var events []dp.Event
		cfg := dp.Config{BucketCap: 1 << 10, FirstBucket: 1 << 10, Observe: func(e dp.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}
		m := newModel()
		d, err := dp.New(ctx, w.Comm, m, cfg)
		if err != nil {
			return err
		}
		defer d.Close()
		s, _ := data.NewSampler(examples, globalBatch, w.Rank(), 2, seed, true)
		if _, err := d.Step(ctx, batches(t, s, 0, 1), newOpt(t, m.Store())); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		issuedBefore := 0
		for _, e := range events {
			if e.Kind == dp.BackwardEnd {
				break
			}
			if e.Kind == dp.BucketIssued {
				issuedBefore++
			}
		}
		if issuedBefore < len(d.Buckets())-1 {
			return fmt.Errorf("%d of %d buckets issued before backward ended, want all but the last: %v", issuedBefore, len(d.Buckets()), events)
		}
		return nil
	})
}

// TestUnusedParameter: a parameter without a gradient is an error on
// every rank that names it; nobody hangs.
func TestUnusedParameter(t *testing.T) {
	errs := make([]error, 3)
	j := spmdtest.NewJob(t, spmdtest.Mem, 3)
	defer j.Close()
	ctx, cancel := context.WithTimeout(context.Background(), spmdtest.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	for r, w := range j.Worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := newSkipping()
			d, err := dp.New(ctx, w.Comm, m, dp.Config{BucketCap: 1 << 10})
			if err != nil {
				errs[r] = err
				return
			}
			defer d.Close()
			s, _ := data.NewSampler(examples, globalBatch, r, 3, seed, true)
			_, errs[r] = d.Step(ctx, batches(t, s, 0, 1), newOpt(t, m.Store()))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "fc1.bias") {
			t.Errorf("rank %d: %v, want an error naming fc1.bias", r, err)
		}
	}
}

// skipping is a two-layer classifier whose backward never reports fc1's
// bias ready.
type skipping struct {
	st     *nn.Store
	l1, l2 *nn.Linear
	ce     nn.CrossEntropy
	in     nn.Tensor
}

func newSkipping() *skipping {
	b := nn.NewBuilder()
	m := &skipping{l1: nn.NewLinear(b.Scope("fc1"), inputs, 16, true), l2: nn.NewLinear(b.Scope("fc2"), 16, classes, true)}
	m.st = b.Build(seed)
	return m
}

func (m *skipping) Store() *nn.Store { return m.st }

func (m *skipping) Forward(b *nn.Batch, train bool) (float32, error) {
	m.in = nn.Tensor{Shape: []int{b.N, b.XDim}, Data: b.X}
	return m.ce.Forward(m.l2.Forward(m.l1.Forward(&m.in, train), train), b.Y)
}

func (m *skipping) Backward(scale float32) {
	dx := m.l2.Backward(m.ce.Backward(scale))
	m.st.Ready(m.l2.Params()...)
	m.l1.Backward(dx)
	m.st.Ready(m.l1.W)
}

// TestRankKilled: a rank that dies mid-training makes the others' steps
// fail with ErrPeerLost naming it.
func TestRankKilled(t *testing.T) {
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
			m := newModel()
			d, err := dp.New(ctx, w.Comm, m, dp.Config{BucketCap: 1 << 10})
			if err != nil {
				errs[r] = err
				return
			}
			opt := newOpt(t, m.Store())
			s, _ := data.NewSampler(examples, globalBatch, r, 3, seed, true)
			for step := range steps {
				if r == 2 && step == 5 {
					j.Kill(2)
					return
				}
				if _, err := d.Step(ctx, batches(t, s, step, 1), opt); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for r := 0; r < 2; r++ {
		if !errors.Is(errs[r], spmd.ErrPeerLost) || !strings.Contains(errs[r].Error(), "rank 2") {
			t.Errorf("rank %d: %v, want ErrPeerLost naming rank 2", r, errs[r])
		}
	}
}
