package spmd_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

// words returns the first two words of c's shared memory.
func words(t *testing.T, c *spmd.Comm) (word, sleepers *atomic.Uint32) {
	t.Helper()
	mem, err := c.Shared(64)
	if err != nil {
		t.Fatal(err)
	}
	return (*atomic.Uint32)(unsafe.Pointer(&mem[0])), (*atomic.Uint32)(unsafe.Pointer(&mem[4]))
}

// The ranks of a communicator on one host get the same memory, from the
// communicator and from its collective context; ranks of several hosts
// get none.
func TestShared(t *testing.T) {
	ws, _ := spmdtest.Worlds(t, 2)
	defer closeAll(ws)
	a, _ := words(t, ws[0].Comm)
	b, _ := words(t, ws[1].Collective())
	a.Store(42)
	if b.Load() != 42 {
		t.Fatalf("rank 1 reads %d where rank 0 stored 42", b.Load())
	}
	if _, err := ws[0].Shared(128); err == nil {
		t.Fatal("Shared with another size: no error")
	}

	spmdtest.RunHosts(t, []string{"a", "a", "b"}, func(ctx context.Context, w *spmd.World) error {
		if w.Shares() {
			return errors.New("Shares across two hosts: true")
		}
		if _, err := w.Shared(64); !errors.Is(err, spmd.ErrNotShared) {
			return errors.New("Shared across two hosts: want ErrNotShared")
		}
		return nil
	})
}

// A rank that waits past its poll budget sleeps, and the rank that stores
// the word wakes it. The nap is made longer than the test may take, so
// that only the wake can end the wait.
func TestWaitSharedWakes(t *testing.T) {
	defer spmd.SetSharedNap(time.Hour)()
	ws, _ := spmdtest.Worlds(t, 2)
	defer closeAll(ws)
	word, sleepers := words(t, ws[0].Comm)
	errc := make(chan error, 1)
	go func() { errc <- ws[1].WaitShared(context.Background(), 0, word, sleepers, 7) }()
	for sleepers.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	spmd.PublishShared(word, sleepers, 7)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sleeping waiter was not woken")
	}
}

// Rounds published just as their waiter runs out of its poll budget and
// goes to sleep all wake it: PublishShared's store, a release store where
// the kernel has membarrier, is seen by a sleeper that its check of the
// sleepers missed (the fence in WaitShared). The nap is longer than the
// test may take, so a lost wake-up stalls a round: a PublishShared that
// does not wake fails it. The window that the fence closes is a store
// still in the store buffer, nanoseconds, which the test does not hit at
// will (it passed 400 rounds with the sleepers read before the store).
// It runs without the race detector too (make test), under which
// PublishShared makes no release stores.
func TestPublishSharedWakesAll(t *testing.T) {
	defer spmd.SetSharedNap(time.Hour)()
	ws, _ := spmdtest.Worlds(t, 2)
	defer closeAll(ws)
	word, sleepers := words(t, ws[0].Comm)
	const rounds = 400
	errc := make(chan error, 1)
	var waiting atomic.Uint32 // the round rank 1 waits for
	go func() {
		for r := uint32(1); r <= rounds; r++ {
			waiting.Store(r)
			if err := ws[1].WaitShared(context.Background(), 0, word, sleepers, r); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	budget := spmd.PollBudget()
	for r := uint32(1); r <= rounds; r++ {
		for waiting.Load() != r {
			runtime.Gosched()
		}
		// Publish from a little before the budget ends to a little
		// after, when the waiter counts itself a sleeper.
		until := time.Now().Add(budget*9/10 + time.Duration(r%20)*budget/100)
		for time.Now().Before(until) {
		}
		spmd.PublishShared(word, sleepers, r)
		deadline := time.Now().Add(10 * time.Second)
		for waiting.Load() == r && time.Now().Before(deadline) {
			select {
			case err := <-errc:
				if err != nil || r != rounds {
					t.Fatalf("round %d: waiter ended: %v", r, err)
				}
				return
			default:
				runtime.Gosched()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d was published but its waiter (sleepers %d) did not wake in 10 s", r, sleepers.Load())
		}
	}
	// The last round returns above, once the waiter has ended.
}

// A wait ends with the context's cause, or with ErrPeerLost naming the rank
// that was to store the word and is gone.
func TestWaitSharedFails(t *testing.T) {
	ws, nw := spmdtest.Worlds(t, 3)
	defer closeAll(ws)
	word, sleepers := words(t, ws[0].Comm)
	stop := errors.New("stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(10*time.Millisecond, func() { cancel(stop) })
	if err := ws[0].WaitShared(ctx, 1, word, sleepers, 1); !errors.Is(err, stop) {
		t.Fatalf("cancelled wait: %v, want its cause", err)
	}
	time.AfterFunc(10*time.Millisecond, func() { nw.Kill(2) })
	guard, stopGuard := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer stopGuard()
	err := ws[0].WaitShared(guard, 2, word, sleepers, 1)
	var pe *spmd.PeerError
	if !errors.Is(err, spmd.ErrPeerLost) || !errors.As(err, &pe) || pe.Rank != 2 {
		t.Fatalf("wait for a lost rank: %v, want ErrPeerLost naming rank 2", err)
	}
}

func closeAll(ws []*spmd.World) {
	for _, w := range ws {
		w.Close()
	}
}
