package tp_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// counts is how many collectives of each operation (prims' names:
// "allreduce", "allgather", "reducescatter") a pass made.
type counts map[string]int

// pass is a layer's forward and backward pass on a rank.
type pass struct {
	forward, backward func()
}

// countCollectives runs on size ranks, each recorded by a trace
// recorder, the passes that setup returns, and returns, per rank, the
// collectives on the group's communicator that began and ended within
// forward and within backward, read back from the trace files.
func countCollectives(t *testing.T, size int, sp bool, setup func(g *tp.Group) (pass, error)) (fwd, bwd []counts) {
	t.Helper()
	dir := t.TempDir()
	recs := make([]*trace.Recorder, size)
	ws, _ := spmdtest.Worlds(t, size, func(r int) []spmd.Option {
		rec, err := trace.New(dir, trace.Header{Rank: r, Size: size})
		if err != nil {
			t.Fatal(err)
		}
		recs[r] = rec
		return []spmd.Option{spmd.WithTrace(rec)}
	})
	type window struct {
		comm       uint32
		t0, t1, t2 int64
	}
	wins := make([]window, size)
	errs := make([]error, size)
	ctx, cancel := context.WithTimeout(context.Background(), spmdtest.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	for r, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close() // writes the trace
			errs[r] = func() (err error) {
				defer nn.RecoverAbort(&err)
				g := tp.NewGroup(w.Comm, sp)
				g.Bind(ctx)
				p, err := setup(g)
				if err != nil {
					return err
				}
				rec := recs[r]
				wins[r].comm = w.Comm.ID()
				wins[r].t0 = rec.Now()
				p.forward()
				wins[r].t1 = rec.Now()
				p.backward()
				wins[r].t2 = rec.Now()
				return nil
			}()
			if errs[r] != nil {
				w.Close() // so that the others fail rather than wait
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	fwd, bwd = make([]counts, size), make([]counts, size)
	for r, rec := range recs {
		f, err := trace.ReadFile(rec.Path())
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		win := wins[r]
		fwd[r], bwd[r] = counts{}, counts{}
		for _, e := range f.Events {
			if e.Kind != trace.CollectiveEvent || e.Comm != win.comm {
				continue
			}
			op := f.Str(e.Name)
			switch {
			case e.Start >= win.t0 && e.End <= win.t1:
				fwd[r][op]++
			case e.Start >= win.t1 && e.End <= win.t2:
				bwd[r][op]++
			case e.End > win.t0 && e.Start < win.t2:
				t.Errorf("rank %d: a %s straddles the passes' boundaries", r, op)
			}
		}
	}
	return fwd, bwd
}

// TestCollectives counts the collectives each pass makes, through the
// trace point that every collective passes: Megatron's two all-reduces
// forward and two backward per block, their sequence-parallel
// replacements, and the vocabulary-parallel loss's three all-reduces
// forward and none backward.
func TestCollectives(t *testing.T) {
	blockPass := func(size int, dropout float32) func(g *tp.Group) (pass, error) {
		return func(g *tp.Group) (pass, error) {
			n, tt := tokens(size)
			if err := g.SetTokens(n, tt); err != nil {
				return pass{}, err
			}
			cfg := blockConfig(size, dropout)
			b := nn.NewBuilder()
			k, err := tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
			if err != nil {
				return pass{}, err
			}
			b.Build(seed)
			_, rows := g.RowBlock()
			x := nn.FromData(randn("x", rows*cfg.Dim), rows, cfg.Dim)
			if !g.SeqParallel {
				x = x.View(n, tt, cfg.Dim)
			}
			var y *nn.Tensor
			return pass{
				forward:  func() { y = k.Forward(x, true) },
				backward: func() { k.Backward(y) },
			}, nil
		}
	}
	lossPass := func(g *tp.Group) (pass, error) {
		c := tp.NewCrossEntropy(g, 10)
		z := nn.FromData(randn("z", 8*(c.Hi-c.Lo)), 8, c.Hi-c.Lo)
		return pass{
			forward: func() {
				if _, err := c.Forward(z, []int32{1, 2, -1, 9, 0, 4, 5, 6}); err != nil {
					panic(nn.Abort{Err: err})
				}
			},
			backward: func() { c.Backward(1) },
		}, nil
	}
	embedPass := func(g *tp.Group) (pass, error) {
		if err := g.SetTokens(2, 4); err != nil {
			return pass{}, err
		}
		b := nn.NewBuilder()
		e := tp.NewEmbedding(b.Scope("wte"), g, 10, 8, nn.Normal(1))
		b.Build(seed)
		var y *nn.Tensor
		return pass{
			forward: func() {
				var err error
				if y, err = e.Forward(someIDs, 2, 4); err != nil {
					panic(nn.Abort{Err: err})
				}
			},
			backward: func() { e.Backward(y) },
		}, nil
	}
	cases := []struct {
		name     string
		size     int
		sp       bool
		setup    func(g *tp.Group) (pass, error)
		fwd, bwd counts
	}{
		{"block/tp 1", 1, false, blockPass(1, 0), counts{}, counts{}},
		{"block/tp 2", 2, false, blockPass(2, 0), counts{"allreduce": 2}, counts{"allreduce": 2}},
		{"block/tp 4", 4, false, blockPass(4, 0), counts{"allreduce": 2}, counts{"allreduce": 2}},
		{"block with dropout/tp 2", 2, false, blockPass(2, 0.2), counts{"allreduce": 2}, counts{"allreduce": 2}},
		{"block/tp 1/sp", 1, true, blockPass(1, 0), counts{}, counts{}},
		{"block/tp 2/sp", 2, true, blockPass(2, 0),
			counts{"allgather": 2, "reducescatter": 2}, counts{"allgather": 2, "reducescatter": 2, "allreduce": 1}},
		{"block/tp 3/sp", 3, true, blockPass(3, 0),
			counts{"allgather": 2, "reducescatter": 2}, counts{"allgather": 2, "reducescatter": 2, "allreduce": 1}},
		{"cross-entropy/tp 1", 1, false, lossPass, counts{}, counts{}},
		{"cross-entropy/tp 2", 2, false, lossPass, counts{"allreduce": 3}, counts{}},
		{"cross-entropy/tp 4", 4, false, lossPass, counts{"allreduce": 3}, counts{}},
		{"embedding/tp 2", 2, false, embedPass, counts{"allreduce": 1}, counts{}},
		{"embedding/tp 2/sp", 2, true, embedPass, counts{"reducescatter": 1}, counts{"allgather": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fwd, bwd := countCollectives(t, tc.size, tc.sp, tc.setup)
			for r := range fwd {
				if !maps.Equal(fwd[r], tc.fwd) {
					t.Errorf("rank %d: forward made %v, want %v", r, fwd[r], tc.fwd)
				}
				if !maps.Equal(bwd[r], tc.bwd) {
					t.Errorf("rank %d: backward made %v, want %v", r, bwd[r], tc.bwd)
				}
			}
		})
	}
}
