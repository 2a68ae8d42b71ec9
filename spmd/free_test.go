package spmd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
)

// TestFree frees a communicator with a receive posted on it and a message
// waiting unreceived: the receive fails with ErrFreed, and so do every
// later call on the communicator and its collective context, while the
// world and a sibling communicator go on. A rank that still sends on it
// after its peer freed it completes, and the peer drops the message.
func TestFree(t *testing.T) {
	each(t, 3, func(ctx context.Context, w *spmd.World) error {
		sub, err := w.Split(ctx, 0, -w.Rank()) // reversed: sub rank 2 is world rank 0
		if err != nil {
			return err
		}
		sib, err := w.Split(ctx, 0, w.Rank())
		if err != nil {
			return err
		}
		me, right, left := sub.Rank(), (sub.Rank()+1)%3, (sub.Rank()+2)%3
		got := []byte{0}
		if _, err := sub.Sendrecv(ctx, []byte{byte(me)}, right, 1, got, left, 1); err != nil {
			return err
		}
		if got[0] != byte(left) {
			return fmt.Errorf("got %d from sub rank %d", got[0], left)
		}
		// A message that nobody receives, and a receive that nothing
		// matches, on each context.
		if err := sub.Send(ctx, right, 2, []byte{1, 2, 3}); err != nil {
			return err
		}
		pending := sub.Irecv(left, 3, make([]byte, 1))
		pendingColl := sub.Collective().Irecv(left, 3, make([]byte, 1))
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if err := sub.Free(); err != nil {
			return err
		}
		for _, r := range []*spmd.Request{pending, pendingColl} {
			if _, err := r.Wait(ctx); !errors.Is(err, spmd.ErrFreed) {
				return fmt.Errorf("receive pending at Free: got %v, want ErrFreed", err)
			}
		}
		if err := sub.Free(); err != nil {
			return fmt.Errorf("second Free: %v", err)
		}
		calls := map[string]error{
			"send":         sub.Send(ctx, right, 4, []byte{1}),
			"send to self": sub.Send(ctx, me, 4, []byte{1}),
			"barrier":      sub.Barrier(ctx),
		}
		_, calls["recv"] = sub.Recv(ctx, left, 2, make([]byte, 3))
		_, calls["split"] = sub.Split(ctx, 0, 0)
		_, calls["collective send"] = 0, sub.Collective().Send(ctx, right, 5, nil)
		for name, err := range calls {
			if !errors.Is(err, spmd.ErrFreed) {
				return fmt.Errorf("%s after Free: got %v, want ErrFreed", name, err)
			}
		}
		if err := w.Free(); err == nil {
			return fmt.Errorf("Free of the world: no error")
		}
		// The sibling, made the same way, still works, and so does the world.
		if _, err := sib.Sendrecv(ctx, []byte{7}, (sib.Rank()+1)%3, 2, got, (sib.Rank()+2)%3, 2); err != nil || got[0] != 7 {
			return fmt.Errorf("sibling after Free: %v, got %d", err, got[0])
		}
		return w.Barrier(ctx)
	})
}

// TestFreeDropsLateMessages frees a communicator on one rank while the
// other keeps sending on it: the sends complete (small ones are eager),
// the freed side keeps none of them, and its world is unaffected.
func TestFreeDropsLateMessages(t *testing.T) {
	each(t, 2, func(ctx context.Context, w *spmd.World) error {
		sub, err := w.Split(ctx, 0, w.Rank())
		if err != nil {
			return err
		}
		if w.Rank() == 0 {
			if err := sub.Free(); err != nil {
				return err
			}
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if w.Rank() == 1 {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			for i := 0; i < 100; i++ {
				if err := sub.Send(sctx, 0, 1, make([]byte, 1000)); err != nil {
					return fmt.Errorf("send %d to a rank that freed the comm: %v", i, err)
				}
			}
		}
		if err := w.Barrier(ctx); err != nil {
			return err
		}
		if w.Rank() == 0 {
			if n := spmd.Queued(sub); n != 0 {
				return fmt.Errorf("%d messages kept for a freed communicator", n)
			}
		}
		return nil
	})
}
