package spmd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
)

// Large messages sent before their receives are posted, received in
// another order than sent: over shared memory the started sends are left
// in the sender's memory until a receive takes them, and neither they nor
// a blocking Send behind them may hold up the messages after them.
func TestEarlyLargeMessagesAnyOrder(t *testing.T) {
	const size = 1<<20 + 7
	msg := func(i int) []byte {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i*31 + j*7)
		}
		return b
	}
	each(t, 2, func(ctx context.Context, w *spmd.World) error {
		if err := firstLargeMessage(ctx, w, size); err != nil {
			return err
		}
		if w.Rank() == 0 {
			var reqs []*spmd.Request
			for tag := 1; tag <= 3; tag++ {
				reqs = append(reqs, w.Isend(ctx, 1, tag, msg(tag)))
			}
			if err := w.Send(ctx, 1, 4, msg(4)); err != nil { // blocking, behind the started ones
				return err
			}
			if err := w.Send(ctx, 1, 5, []byte("last")); err != nil {
				return err
			}
			return spmd.WaitAll(ctx, reqs...)
		}
		buf := make([]byte, 8)
		if n, err := w.Recv(ctx, 0, 5, buf); err != nil || string(buf[:n]) != "last" {
			return fmt.Errorf("tag 5: %q, %v", buf[:n], err)
		}
		for _, tag := range []int{4, 2, 3, 1} {
			got := make([]byte, size)
			if _, err := w.Recv(ctx, 0, tag, got); err != nil {
				return fmt.Errorf("tag %d: %w", tag, err)
			}
			if !bytes.Equal(got, msg(tag)) {
				return fmt.Errorf("tag %d: other bytes", tag)
			}
		}
		return nil
	})
}

// A large message that waits for its receive, received into a shorter
// buffer: the receive fails with ErrTruncated holding the message's head,
// and the send completes.
func TestEarlyLargeMessageTruncated(t *testing.T) {
	const size = 1 << 20
	each(t, 2, func(ctx context.Context, w *spmd.World) error {
		msg := make([]byte, size)
		for j := range msg {
			msg[j] = byte(j * 13)
		}
		if err := firstLargeMessage(ctx, w, size); err != nil {
			return err
		}
		if w.Rank() == 0 {
			if err := spmd.WaitAll(ctx, w.Isend(ctx, 1, 1, msg)); err != nil {
				return fmt.Errorf("the truncated message's send: %w", err)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond) // the message is there before its receive
		short := make([]byte, 1000)
		n, err := w.Recv(ctx, 0, 1, short)
		if !errors.Is(err, spmd.ErrTruncated) {
			return fmt.Errorf("got %d bytes, %v; want ErrTruncated", n, err)
		}
		if !bytes.Equal(short[:n], msg[:n]) || n != len(short) {
			return fmt.Errorf("got %d bytes of the message's head, or other bytes", n)
		}
		return nil
	})
}

// A wait for a large Isend that no receive takes ends with its context:
// over shared memory the send is taken back, and a receive of that tag
// posted after never sees it, while the link stays up (it dropped, and the
// receiver failed as for a lost peer); transports that copy eagerly
// complete it anyway. Nothing hangs.
func TestCancelledWaitForUntakenIsend(t *testing.T) {
	const size = 1 << 20
	each(t, 2, func(ctx context.Context, w *spmd.World) error {
		msg := make([]byte, size)
		if err := firstLargeMessage(ctx, w, size); err != nil {
			return err
		}
		if w.Rank() == 0 {
			wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := w.Isend(ctx, 1, 1, msg).Wait(wctx)
			if took := time.Since(start); took > 5*time.Second {
				return fmt.Errorf("the wait took %v after its context ended", took)
			}
			if w.Comm.SingleCopy(1) > 0 && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("the wait for a send nobody took = %v, want the context's error", err)
			}
			return w.Send(ctx, 1, 2, []byte("done"))
		}
		buf := make([]byte, 8)
		if _, err := w.Recv(ctx, 0, 2, buf); err != nil {
			return fmt.Errorf("the message after a withdrawn one: %v", err)
		}
		if w.Comm.SingleCopy(0) > 0 {
			// The withdrawn message, kept unmatched, fails the receive
			// that matches it, as nothing can be copied.
			if _, err := w.Recv(ctx, 0, 1, make([]byte, size)); !errors.Is(err, spmd.ErrWithdrawn) {
				return fmt.Errorf("a receive of the withdrawn message: %v, want ErrWithdrawn", err)
			}
		}
		return nil
	})
}

// firstLargeMessage sends one large message from rank 0 to rank 1, received
// at once: over shared memory rank 1 then knows it may read rank 0's
// memory, and rank 0's large Isends after it are started (kept by the
// receiver) from the first.
func firstLargeMessage(ctx context.Context, w *spmd.World, size int) error {
	if w.Rank() == 0 {
		return w.Send(ctx, 1, 9, make([]byte, size))
	}
	_, err := w.Recv(ctx, 0, 9, make([]byte, size))
	return err
}
