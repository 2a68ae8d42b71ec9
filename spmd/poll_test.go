package spmd

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// A request polls for the small messages' budget plus what its bytes take
// at 1 GB/s, at most maxSizeBudget more; on a crowded host for the crowded
// budget whatever its size.
func TestBudgetFor(t *testing.T) {
	defer manyWorlds.Store(manyWorlds.Swap(false)) // as in a launched rank, whatever other tests left open
	for _, c := range []struct {
		n       int
		crowded bool
		want    time.Duration
	}{
		{0, false, pollBudget},
		{8, false, pollBudget + 8*time.Nanosecond},
		{1 << 20, false, pollBudget + (1<<20)*time.Nanosecond},
		{64 << 20, false, pollBudget + maxSizeBudget},
		{0, true, crowdedPollBudget},
		{64 << 20, true, crowdedPollBudget},
	} {
		if got := budgetFor(c.n, c.crowded); got != c.want {
			t.Errorf("budgetFor(%d, crowded %v) = %v, want %v", c.n, c.crowded, got, c.want)
		}
	}
}

// Where a process runs more worlds than Go processors (ranks that are its
// goroutines), a wait polls for the short budget; once they are closed
// down to as many as the processors, for the long one again.
func TestManyWorldsPollBriefly(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	countWorld(0) // as GOMAXPROCS now has it
	if manyWorlds.Load() {
		t.Skipf("%d worlds of other tests are live", liveWorlds.Load())
	}
	peers := []Peer{{Rank: 0}}
	var ws []*World
	for range 2 {
		w, err := New(selfOnly{}, 0, peers)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if got := budgetFor(0, false); got != sharedRuntimePollBudget {
		t.Errorf("2 worlds on 1 processor: budget %v, want %v", got, sharedRuntimePollBudget)
	}
	ws[1].Close()
	ws[1].Close() // idempotent: counted once
	if got := budgetFor(0, false); got != pollBudget {
		t.Errorf("1 world on 1 processor: budget %v, want %v", got, pollBudget)
	}
	ws[0].Close()
}

// pollCounter is a transport that delivers nothing and counts the polls of
// the goroutines that wait on it.
type pollCounter struct {
	selfOnly
	polls atomic.Int64
}

func (*pollCounter) BeginPoll()   {}
func (p *pollCounter) Poll() bool { p.polls.Add(1); return false }
func (*pollCounter) EndPoll()     {}

// TestListenWaitsWithoutPolling: the wait for a Listen receive, which may
// never complete, blocks at once, where an Irecv's first polls the
// transport; closing the world ends it.
func TestListenWaitsWithoutPolling(t *testing.T) {
	tr := &pollCounter{}
	w, err := New(tr, 0, []Peer{{Rank: 0}, {Rank: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	buf := make([]byte, 8)
	r := w.Listen(1, 5, buf)
	done := make(chan error, 1)
	go func() {
		_, err := r.Wait(context.Background())
		done <- err
	}()
	time.Sleep(2 * budgetFor(len(buf), false))
	if n := tr.polls.Load(); n != 0 {
		t.Errorf("a Listen's wait polled the transport %d times, want none", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budgetFor(len(buf), false)/4)
	defer cancel()
	if _, err := w.Irecv(1, 6, buf).Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an Irecv that nothing completes: %v, want the deadline", err)
	}
	if tr.polls.Load() == 0 {
		t.Error("an Irecv's wait did not poll the counting transport: the test sees nothing")
	}
	w.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("a Listen's wait when the world closed: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Listen's wait did not end when the world closed")
	}
}

// A rank alone in its process, with processors to spare, yields its Go
// processor while it waits for a peer's word only once per sharedYield
// of waiting (each yield wakes an idle processor's thread, which takes a
// bound rank's CPU); ranks that are goroutines of one process, or a rank
// with one processor, yield every 1024 rounds, for a goroutine they wait
// for may need the processor. The word is published from the first yield
// after publishAfter, so that no other goroutine need be scheduled
// meanwhile.
func TestWaitSharedYieldsRarely(t *testing.T) {
	const publishAfter = 6 * sharedYield
	budget := budgetFor(0, false)
	if budget < 2*publishAfter {
		t.Skipf("a poll budget of %v (other tests' worlds are live): the wait would sleep before it yields", budget)
	}
	w, err := New(selfOnly{}, 0, []Peer{{Rank: 0}, {Rank: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var word, sleepers atomic.Uint32
	var begin time.Time
	var yields []time.Duration // since begin
	defer swapVar(&gosched, func() {
		y := time.Since(begin)
		yields = append(yields, y)
		if y >= publishAfter {
			PublishShared(&word, &sleepers, word.Load()+1)
		}
	})()
	count := map[bool]int{}
	for _, rare := range []bool{true, false} {
		restore := swapVar(&yieldRarely, func() bool { return rare })
		// A wait descheduled past its poll budget (CI's 2 cores, busy)
		// sleeps before it yields again, and the late publish ends it:
		// not what is tested here, so such a round is tried again.
		for try := 1; ; try++ {
			yields = yields[:0]
			begin = time.Now()
			want := word.Load() + 1
			late := time.AfterFunc(time.Second, func() { PublishShared(&word, &sleepers, want) })
			err := w.WaitShared(context.Background(), 1, &word, &sleepers, want)
			late.Stop()
			if err != nil {
				t.Fatal(err)
			}
			if len(yields) > 0 && yields[len(yields)-1] >= publishAfter {
				break
			}
			if try == 5 {
				t.Fatalf("rarely %v: in 5 tries the wait did not end at a yield %v or more into it (yields %v)", rare, publishAfter, yields)
			}
		}
		restore()
		count[rare] = len(yields)
		if !rare {
			continue
		}
		for i, y := range yields {
			if y < time.Duration(i+1)*sharedYield {
				t.Errorf("a rank alone: yield %d at %v into the wait, want none before %v: %v", i+1, y, time.Duration(i+1)*sharedYield, yields)
				break
			}
		}
	}
	// Under the race detector a round takes a microsecond or more.
	if !raceEnabled && count[false] <= 2*count[true] {
		t.Errorf("goroutine ranks yielded %d times in a wait of %v, a rank alone %d: want many more", count[false], publishAfter, count[true])
	}
}

// Processors are to spare (WaitShared yields rarely) where the process
// runs one world on more than one Go processor only.
func TestSpareProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	base := liveWorlds.Load()
	defer func() { liveWorlds.Store(base); countWorld(0) }()
	for _, c := range []struct {
		worlds int32
		procs  int
		want   bool
	}{{1, 2, true}, {1, 16, true}, {1, 1, false}, {2, 2, false}, {5, 2, false}} {
		runtime.GOMAXPROCS(c.procs)
		liveWorlds.Store(c.worlds)
		countWorld(0)
		if got := spareProcs.Load(); got != c.want {
			t.Errorf("%d worlds on %d processors: spare %v, want %v", c.worlds, c.procs, got, c.want)
		}
	}
}

// swapVar sets *p to v and returns what restores it.
func swapVar[T any](p *T, v T) (restore func()) {
	old := *p
	*p = v
	return func() { *p = old }
}
