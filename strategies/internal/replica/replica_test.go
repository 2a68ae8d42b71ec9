package replica_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/internal/replica"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/ps"
	"github.com/gorun-hpc/gorun/strategies/zero"
)

// cases give the MLP sizes of rank 0 and of the others: 8-16-3, 12-12-3
// and 8-8-10-3 have 195 parameters each, in 2, 2 and 3 units (a unit a
// linear layer).
var cases = []struct {
	name        string
	first, rest []int
	want        string // "" for no error
}{
	{"same", []int{8, 16, 3}, []int{8, 16, 3}, ""},
	{"same count, other shapes", []int{8, 16, 3}, []int{12, 12, 3},
		"the ranks' models differ: rank 1's parameters have other shapes than rank 0's, the same 195 numbers in 2 units (this rank's: "},
	{"same count, other units", []int{8, 16, 3}, []int{8, 8, 10, 3},
		"the ranks' models differ: 195 to 195 parameters in 2 to 3 units (this rank "},
	{"other sizes", []int{8, 16, 3}, []int{8, 17, 3},
		"the ranks' models differ: 195 to 207 parameters in 2 to 2 units (this rank "},
}

func mlp(w *spmd.World, first, rest []int) *nn.Sequential {
	if w.Rank() == 0 {
		return nn.NewMLP(1, first...)
	}
	return nn.NewMLP(1, rest...)
}

// TestModel: every rank gets the same answer, an error naming what differs
// and the first rank that differs from rank 0.
func TestSame(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
				err := replica.Same(ctx, w.Comm, mlp(w, tc.first, tc.rest).Store(), "test")
				check(t, w.Rank(), err, "test: "+tc.want, tc.want == "")
				return nil
			})
		})
	}
}

func check(t *testing.T, rank int, err error, want string, none bool) {
	t.Helper()
	switch {
	case none && err != nil:
		t.Errorf("rank %d: %v, want no error", rank, err)
	case !none && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("rank %d: %v, want an error with %q", rank, err, want)
	}
}

// TestDrivers: dp, zero (every stage) and ps refuse ranks whose models
// differ, with the check's error, before they train anything; none
// panics on the way out.
func TestDrivers(t *testing.T) {
	adam := func(params []*nn.Param, lo, hi int) (nn.Optimizer, error) {
		return nn.NewAdamW(nn.DefaultAdamW(), params, lo, hi)
	}
	drivers := map[string]func(ctx context.Context, w *spmd.World, m nn.Model) error{
		"dp": func(ctx context.Context, w *spmd.World, m nn.Model) error {
			d, err := dp.New(ctx, w.Comm, m, dp.Config{})
			if err == nil {
				d.Close()
			}
			return err
		},
		"ps": func(ctx context.Context, w *spmd.World, m nn.Model) error {
			d, err := ps.New(ctx, w.Comm, m, ps.Config{Servers: 1}, adam)
			if err == nil {
				d.Close()
			}
			return err
		},
	}
	for stage := range 4 {
		drivers["zero stage "+string(rune('0'+stage))] = func(ctx context.Context, w *spmd.World, m nn.Model) error {
			z, err := zero.New(ctx, w.Comm, m, zero.Config{Stage: stage, Optimizer: adam})
			if err == nil {
				z.Close()
			}
			return err
		}
	}
	for name, start := range drivers {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
					err := start(ctx, w, mlp(w, tc.first, tc.rest))
					check(t, w.Rank(), err, strings.Fields(name)[0]+": "+tc.want, tc.want == "")
					return nil
				})
			})
		}
	}
}
