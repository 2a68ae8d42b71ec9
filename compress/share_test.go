package compress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// TestGatherScatterStates: the states GatherStates collects at a root,
// handed back by ScatterStates to fresh codecs on 3 ranks, are each rank's
// own again, byte for byte; a rank whose codec cannot take its state
// fails every rank, the others naming it.
func TestGatherScatterStates(t *testing.T) {
	for _, spec := range []string{"topk:0.1", "powersgd:2"} {
		t.Run(spec, func(t *testing.T) {
			spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
				codec, _ := Parse(spec, 7)
				if _, err := stateSteps(ctx, w.Comm, codec, 0, 3); err != nil {
					return err
				}
				want, err := marshal(codec)
				if err != nil {
					return err
				}
				states, err := GatherStates(ctx, w.Comm, codec, 1)
				if err != nil {
					return err
				}
				if (states != nil) != (w.Rank() == 1) || states != nil && !bytes.Equal(states[w.Rank()], want) {
					return fmt.Errorf("rank %d: GatherStates gave %d states, want 3 at root 1 with this rank's own", w.Rank(), len(states))
				}
				fresh, _ := Parse(spec, 7)
				if err := ScatterStates(ctx, w.Comm, fresh, states, 1); err != nil {
					return err
				}
				if got, _ := marshal(fresh); !bytes.Equal(got, want) {
					return fmt.Errorf("rank %d: the restored state differs from the saved one", w.Rank())
				}
				other := fresh
				if w.Rank() == 2 {
					other, _ = Parse("sign", 7)
				}
				err = ScatterStates(ctx, w.Comm, other, states, 1)
				switch {
				case w.Rank() == 2 && !errors.Is(err, ErrState):
					return fmt.Errorf("rank 2, sign given %s's state: %v, want ErrState", spec, err)
				case w.Rank() != 2 && (err == nil || !strings.Contains(err.Error(), "failed on rank 2")):
					return fmt.Errorf("rank %d: %v, want an error naming rank 2", w.Rank(), err)
				}
				return nil
			})
		})
	}
	if s, err := GatherStates(context.Background(), nil, NewFP16(), 0); s != nil || err != nil || Stateful(NewFP16()) || Stateful(nil) {
		t.Errorf("fp16 keeps no state: GatherStates gave %v, %v", s, err)
	}
	if c, _ := Parse("topk:0.1+s2", 1); StateName(c) != "topk:0.1" || StateName(nil) != "none" {
		t.Errorf("StateName(topk:0.1+s2) = %q, want topk:0.1", StateName(c))
	}
}
