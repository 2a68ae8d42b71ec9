package prims_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/net/mem"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/spmd/transport"
	"github.com/gorun-hpc/gorun/topo"
)

// hang bounds how long the survivors of a lost peer may take to notice: a
// hang detector, not a performance bound.
const hang = 10 * time.Second

// loop runs one collective on c again and again until it fails.
type loop func(ctx context.Context, c *spmd.Comm) error

var lossCases = []struct {
	name string
	run  loop
}{
	{"allreduce/ring", func(ctx context.Context, c *spmd.Comm) error {
		return prims.AllReduce(ctx, c, make([]float32, 1<<18), prims.Sum[float32](), prims.WithAlgo(topo.Ring))
	}},
	{"allreduce/rabenseifner", func(ctx context.Context, c *spmd.Comm) error {
		return prims.AllReduce(ctx, c, make([]int64, 1<<16), prims.Sum[int64](), prims.WithAlgo(topo.Rabenseifner))
	}},
	{"broadcast/tree", func(ctx context.Context, c *spmd.Comm) error {
		return prims.Broadcast(ctx, c, make([]float64, 1<<16), 0, prims.WithAlgo(topo.Tree))
	}},
	{"allgather/ring", func(ctx context.Context, c *spmd.Comm) error {
		return prims.AllGather(ctx, c, make([]uint8, 1<<12), make([]uint8, c.Size()<<12), prims.WithAlgo(topo.Ring))
	}},
	{"alltoall/linear", func(ctx context.Context, c *spmd.Comm) error {
		return prims.AllToAll(ctx, c, make([]int32, c.Size()<<12), make([]int32, c.Size()<<12))
	}},
	{"barrier/tree", func(ctx context.Context, c *spmd.Comm) error {
		return prims.Barrier(ctx, c, prims.WithAlgo(topo.Tree))
	}},
}

// TestPeerLost kills a rank while the others run a collective in a loop,
// over every transport: every survivor's call fails with an error that
// names the dead rank (wrapping spmd.ErrPeerLost), the collective and the
// communicator, even the ranks that never talk to the dead one directly.
// A killed rank of a mixed job, its transports closed one after the
// other, told the ranks of the other host that a healthy rank of its own
// host was lost.
func TestPeerLost(t *testing.T) {
	for _, kind := range spmdtest.Kinds {
		for _, tc := range lossCases {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) { peerLostIn(t, kind, tc.name, tc.run) })
		}
	}
}

func peerLostIn(t *testing.T, kind spmdtest.Kind, name string, run loop) {
	const p, victim = 6, 2
	j := spmdtest.NewJob(t, kind, p)
	defer j.Close()
	errs := make([]error, p)
	var started, wg sync.WaitGroup
	started.Add(p)
	for i, w := range j.Worlds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = until(w.Comm, run, &started)
		}()
	}
	started.Wait()
	time.Sleep(20 * time.Millisecond)
	j.Kill(victim)
	if !waitTimeout(&wg, hang) {
		t.Fatalf("survivors still blocked %v after rank %d was killed", hang, victim)
	}
	coll := strings.Split(name, "/")[0]
	for i, err := range errs {
		if i == victim {
			continue
		}
		if !strings.Contains(err.Error(), coll+" (") || !strings.Contains(err.Error(), "on comm 0") {
			t.Errorf("rank %d: got %v, want a %s error on comm 0", i, err, coll)
		}
		// The others either see the victim lost or hear from it that it
		// gave up: where a kill closes its transports (tcp, shm), it may
		// still tell some that its world was closed.
		var pe *spmd.PeerError
		lost := errors.Is(err, spmd.ErrPeerLost) && errors.As(err, &pe) && pe.Rank == victim
		gaveUp := kind != spmdtest.Mem && errors.Is(err, prims.ErrAborted) && strings.Contains(err.Error(), fmt.Sprintf("rank %d: ", victim))
		if !lost && !gaveUp {
			t.Errorf("rank %d: got %v, want an error wrapping ErrPeerLost naming rank %d (rank %d: %v)", i, err, victim, victim, errs[victim])
		}
	}
}

// until runs f on c until it fails, and returns the failure.
func until(c *spmd.Comm, f loop, started *sync.WaitGroup) error {
	ctx := context.Background()
	err := f(ctx, c)
	started.Done()
	for err == nil {
		err = f(ctx, c)
	}
	return err
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestCancelled checks that a caller's cancelled context ends a collective
// that cannot complete (one rank never joins) with the context's error, or
// with ErrAborted when the other waiting rank gave up first and said so.
func TestCancelled(t *testing.T) {
	spmdtest.Run(t, 3, func(ctx context.Context, w *spmd.World) error {
		if w.Rank() == 1 {
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := prims.AllReduce(cctx, w.Comm, make([]float32, 100), prims.Sum[float32](), prims.WithAlgo(topo.Ring))
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, prims.ErrAborted) {
			return fmt.Errorf("got %v, want deadline exceeded or ErrAborted", err)
		}
		return nil
	})
}

// watchLog is a transport that records which peers it was asked to watch
// (over TCP, to dial).
type watchLog struct {
	transport.Transport
	mu      sync.Mutex
	watched map[int]bool
}

func (l *watchLog) Watch(peer int) {
	l.mu.Lock()
	l.watched[peer] = true
	l.mu.Unlock()
	l.Transport.Watch(peer)
}

// TestNoticesReachNobody: the receives for a communicator's notices
// (that a member gave up) ask the transport to reach no member, so that
// over TCP they do not connect every pair of ranks: rank 0 of 6 in a tree
// barrier reaches ranks 1, 2 and 4, and no others. Posted with Irecv, they
// reached all five.
func TestNoticesReachNobody(t *testing.T) {
	const p = 6
	nw := mem.NewNetwork(p)
	logs := make([]*watchLog, p)
	ws := make([]*spmd.World, p)
	for i := range ws {
		logs[i] = &watchLog{Transport: nw.Transport(i), watched: map[int]bool{}}
		w, err := spmd.New(logs[i], i, spmdtest.Peers(p, "mem"))
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	ctx, cancel := context.WithTimeout(context.Background(), spmdtest.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, p)
	for i, w := range ws {
		wg.Go(func() { errs[i] = prims.Barrier(ctx, w.Comm, prims.WithAlgo(topo.Tree)) })
	}
	wg.Wait()
	for _, w := range ws {
		w.Close()
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{3, 5} {
		if logs[0].watched[r] {
			t.Errorf("rank 0 asked its transport to reach rank %d, which it never talks to (watched %v)", r, logs[0].watched)
		}
	}
}

// TestCancelMidLoop cancels one rank's context while all run a collective
// in a loop, at a different moment each round, over every transport: that
// rank's call fails with its context's error, and every other rank's with
// ErrAborted, never with another error. A send that its context's end
// failed while a later one to the same peer went out gave the peer that
// one in its place: the ring all-reduce's survivors failed on a wrong
// length, in each of 6 runs of 40 rounds. Over TCP a send cancelled
// half-way through its frame dropped the link, and the survivors named
// each other lost; over shared memory a receive of a message its sender
// withdrew failed with ErrWithdrawn, before the sender's notice came.
func TestCancelMidLoop(t *testing.T) {
	for _, kind := range spmdtest.Kinds {
		rounds := 20
		if kind == spmdtest.Mem {
			rounds = 40
		}
		if testing.Short() {
			rounds = 5
		}
		for _, tc := range lossCases {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) {
				for round := range rounds {
					cancelMidLoop(t, kind, tc.run, round)
				}
			})
		}
	}
}

func cancelMidLoop(t *testing.T, kind spmdtest.Kind, run loop, round int) {
	const p, victim = 6, 2
	j := spmdtest.NewJob(t, kind, p)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i, w := range j.Worlds {
		wg.Go(func() {
			c := context.Background()
			if i == victim {
				c = ctx
			}
			for errs[i] == nil {
				errs[i] = run(c, w.Comm)
			}
		})
	}
	time.Sleep(time.Duration(round%8) * 500 * time.Microsecond)
	cancel()
	ok := waitTimeout(&wg, hang)
	j.Close()
	if !ok {
		t.Fatalf("round %d: ranks still blocked %v after rank %d's context was cancelled", round, hang, victim)
	}
	for i, err := range errs {
		if !errors.Is(err, prims.ErrAborted) && !(i == victim && errors.Is(err, context.Canceled)) {
			t.Fatalf("round %d: rank %d: %v, want ErrAborted (or, on rank %d, context.Canceled)", round, i, err, victim)
		}
	}
}
