package tp_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/tp"
)

// aborted runs f and returns the error of the nn.Abort it panicked with:
// nil if it returned, an error saying so for any other panic.
func aborted(f func()) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		a, ok := v.(nn.Abort)
		if !ok {
			err = fmt.Errorf("panicked with %T, not nn.Abort: %v", v, v)
			return
		}
		if a.Err == nil {
			err = errors.New("panicked with an nn.Abort without an error")
			return
		}
		// What a driver does with it.
		var got error
		func() {
			defer nn.RecoverAbort(&got)
			panic(v)
		}()
		if !errors.Is(got, a.Err) {
			err = fmt.Errorf("nn.RecoverAbort turned %v into %v", a.Err, got)
			return
		}
		err = a.Err
	}()
	f()
	return nil
}

// TestFailure checks that a collective that fails inside a pass panics
// with an nn.Abort whose error says why: the rank's own context was
// cancelled while it waited, or a peer left. Every rank returns; none
// waits for ever. Rank 0 fails first; the others start the pass after.
func TestFailure(t *testing.T) {
	const size = 3
	cfg := blockConfig(size, 0)
	n, tt := tokens(size)
	cases := []struct {
		name string
		sp   bool
		// fail makes rank 0 fail, alone in the pass (the others wait for
		// it to return): it returns what rank 0's error must wrap (nil:
		// rank 0 makes no pass) and what the others' must.
		fail     func(w *spmd.World, g *tp.Group) (rank0, others error)
		backward bool // the failure comes in Backward
	}{
		{"rank 0 cancels/forward", false, cancel, false},
		{"rank 0 cancels/forward/sp", true, cancel, false},
		{"rank 0 cancels/backward", false, cancel, true},
		{"rank 0 cancels/backward/sp", true, cancel, true},
		{"rank 0 leaves/forward", false, leave, false},
		{"rank 0 leaves/forward/sp", true, leave, false},
		{"rank 0 leaves/backward", false, leave, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			failed := make(chan struct{}) // closed when rank 0 has failed
			var others error              // what the others' errors must wrap; set before failed closes
			spmdtest.Run(t, size, func(ctx context.Context, w *spmd.World) error {
				// A rank that waits for ever fails on this deadline instead.
				ctx, stop := context.WithTimeout(ctx, 20*time.Second)
				defer stop()
				g := tp.NewGroup(w.Comm, tc.sp)
				g.Bind(ctx)
				if err := g.SetTokens(n, tt); err != nil {
					return err
				}
				b := nn.NewBuilder()
				k, err := tp.NewBlock(b.Scope("h.0"), g, cfg, tp.NewRNG(seed), "h.0")
				if err != nil {
					return err
				}
				b.Build(seed)
				_, rows := g.RowBlock()
				x := nn.FromData(randn("x", rows*cfg.Dim), rows, cfg.Dim)
				if !tc.sp {
					x = x.View(n, tt, cfg.Dim)
				}
				var y *nn.Tensor
				if tc.backward {
					if err := aborted(func() { y = k.Forward(x, true) }); err != nil {
						return fmt.Errorf("forward, before the failure: %w", err)
					}
					// Every rank's forward is over before rank 0 fails:
					// a rank that left while another still waited in
					// the forward's last collective broke that one.
					if err := w.Barrier(ctx); err != nil {
						return fmt.Errorf("barrier after the forward: %w", err)
					}
				}
				pass := func() error {
					return aborted(func() {
						if tc.backward {
							k.Backward(y)
						} else {
							k.Forward(x, true)
						}
					})
				}
				var want error
				if g.Rank == 0 {
					defer close(failed)
					if want, others = tc.fail(w, g); want == nil {
						return nil
					}
				} else {
					select {
					case <-failed:
					case <-ctx.Done():
						return fmt.Errorf("waiting for rank 0 to fail: %w", ctx.Err())
					}
					want = others
				}
				err = pass()
				if !errors.Is(err, want) {
					return fmt.Errorf("the pass aborted with %v, want an error wrapping %v", err, want)
				}
				if where := fmt.Sprintf("rank %d of %d", g.Rank, size); !strings.Contains(err.Error(), where) {
					return fmt.Errorf("the error %q does not say %q", err, where)
				}
				return nil
			})
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("the ranks took %v to fail", d)
			}
		})
	}
}

// cancel binds rank 0's group to a context cancelled while its first
// collective waits for the others: rank 0 fails with context.Canceled,
// and the others' calls with prims.ErrAborted, as rank 0 told them.
func cancel(_ *spmd.World, g *tp.Group) (rank0, others error) {
	ctx, stop := context.WithCancel(g.Context())
	time.AfterFunc(50*time.Millisecond, stop)
	g.Bind(ctx)
	return context.Canceled, prims.ErrAborted
}

// leave closes rank 0's world before the pass: the others' calls fail
// with spmd.ErrPeerLost.
func leave(w *spmd.World, _ *tp.Group) (rank0, others error) {
	w.Close()
	return nil, spmd.ErrPeerLost
}
