package spmd

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// ErrNotShared is wrapped by the error of Shared on a communicator whose
// ranks cannot share memory.
var ErrNotShared = errors.New("the ranks of the communicator do not share memory")

// Shares reports whether the ranks of c can share memory (Shared): they are
// all on this host and reach each other through a transport that maps
// shared memory. Every rank of c gets the same answer. Where they can, it
// starts this process's registration for PublishShared's release stores
// (registerEarly), since a caller that asks is about to share.
func (c *Comm) Shares() bool {
	sh, ok := c.core.tr.(transport.Sharer)
	if !ok {
		return false
	}
	me := c.core.peers[c.ranks[c.rank]].HostID
	for _, w := range c.ranks {
		if c.core.peers[w].HostID != me {
			return false
		}
	}
	if !sh.Shares(c.ranks) {
		return false
	}
	registerEarly()
	return true
}

// Shared returns size bytes of memory that every rank of c maps, zero until
// a rank writes it: the same memory for every call on c and on the
// communicator's collective context, which must all pass the same size.
// Library code uses it to run collectives without messages (package prims,
// algorithm "flat"); what it stores there, and when, is its own protocol.
// An error wraps ErrNotShared when the ranks cannot share (Shares).
func (c *Comm) Shared(size int) ([]byte, error) {
	if !c.Shares() {
		return nil, fmt.Errorf("comm %d: %w", c.id, ErrNotShared)
	}
	id := c.base()
	if err := c.core.engine.freed(id); err != nil {
		return nil, err
	}
	c.core.mu.Lock()
	a, ok := c.core.shared[id]
	c.core.mu.Unlock()
	if ok {
		if len(a.mem) != size {
			return nil, fmt.Errorf("comm %d: shared memory of %d bytes asked for again with %d", c.id, len(a.mem), size)
		}
		return a.mem, nil
	}
	// The id alone is unique only among communicators that share a rank;
	// two disjoint ones on one host may have the same, never the same ranks.
	// Ids are not used again, so neither are keys.
	key := fmt.Sprintf("comm %d of %v", id, c.ranks)
	mem, err := c.core.tr.(transport.Sharer).Share(key, c.ranks, size)
	if err != nil {
		return nil, fmt.Errorf("comm %d: %w", c.id, err)
	}
	c.core.mu.Lock()
	if c.core.shared == nil {
		c.core.shared = make(map[uint32]sharedArea)
	}
	c.core.shared[id] = sharedArea{key: key, mem: mem}
	c.core.mu.Unlock()
	return mem, nil
}

// Lost returns why rank r of c can no longer be reached (an error that
// wraps ErrPeerLost and names the rank, or ErrClosed once this rank's world
// is closed), or nil.
func (c *Comm) Lost(r int) error {
	e := c.core.engine
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unusable(c.ranks[r])
}

// WaitShared waits until *word, a word of c's shared memory (Shared) that
// rank r of c counts up, reaches want: until int32(*word-want) >= 0, so
// that the count may wrap. It polls the word, on a host with more ranks
// than cores handing the core on at every round as a waiting request
// does, and once the poll budget is spent sleeps on the word; the rank
// that counts the word up stores it with PublishShared, which wakes the
// sleepers that *sleepers, the count that WaitShared keeps beside it,
// says there are. It returns an error when ctx ends (its cause) or r is
// lost.
func (c *Comm) WaitShared(ctx context.Context, r int, word, sleepers *atomic.Uint32, want uint32) error {
	if reached(word, want) {
		return nil
	}
	crowded := c.core.engine.crowded
	rare := yieldRarely()
	budget, check := budgetFor(0, crowded), 255 // a request's budget, for no bytes
	if crowded {
		check = 7
	}
	done := ctx.Done()
	var start time.Time
	yield := sharedYield
	for i := 1; ; i++ {
		if reached(word, want) {
			return nil
		}
		if crowded { // as idler does, for the same reasons
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			if i%64 == 0 {
				runtime.Gosched()
			}
		} else if !rare && i%1024 == 0 {
			gosched()
		}
		if i&check != 0 {
			continue
		}
		if err := c.waitErr(done, ctx, r, word, want); err != nil {
			return err
		}
		if start.IsZero() {
			start = time.Now()
			continue
		}
		waited := time.Since(start)
		if waited > budget {
			break
		}
		if rare && !crowded && waited >= yield {
			gosched()
			yield = waited + sharedYield
		}
	}
	var w futexWaiter
	for {
		// The budget is spent: sleep until r stores, looking at ctx and r
		// now and then.
		sleepers.Add(1)
		fence() // a PublishShared that missed the count is seen now
		if v := word.Load(); int32(v-want) < 0 {
			w.wait(word, v, sharedNap)
		}
		sleepers.Add(^uint32(0))
		if reached(word, want) {
			return nil
		}
		if err := c.waitErr(done, ctx, r, word, want); err != nil {
			return err
		}
	}
}

// sharedYield is how long WaitShared polls between the times it yields the
// Go processor (runtime.Gosched, so that a goroutine made runnable on this
// processor runs while the others are busy), in a rank alone in its process
// with a core per rank and processors to spare (spareProcs). Each yield
// wakes an idle processor's thread (the runtime's wakep), which, in a rank
// bound to one CPU with GOMAXPROCS 2, takes the CPU from the waiting thread
// at once, looks for work, often takes the waiting goroutine itself and
// sends the first thread to sleep: two context switches, microseconds,
// during which the rank is late for its peers. WaitShared yielded every
// 1024 rounds (a few microseconds of waiting), so whenever a peer was late
// by as much: 2 ranks on the VM's 2 cores, 2,000,000 8-byte all-reduces
// (bench/percall, 4 runs each in turns), 3,000-6,000 yields per rank,
// 200-250 of which woke the other thread and were preempted by it; yielding
// after 50 us of waiting and every 50 us after, 1-56 yields (the waits that
// outlasted a stall of the peer), 40% fewer context switches (vol 123-142
// and invol 138-155 against 201-232 and 251-282) and a third of the time
// its threads spent runnable, waiting for the CPU (90-109 against 311-355
// ms). The mean call did not move there (0.126-0.129 against 0.127-0.132
// us; in the VM's slow spells 0.394-0.408 against 0.387-0.397, p50 alike);
// examples/zero and examples/ddp at np 2 moved by less than their noise
// (zero 9.8-11.1k samples/s against 9.3-10.6k in one series, 7.1-7.5k
// against 7.3-7.5k in a slow spell; ddp 3% faster there). With 16 ranks on
// 16 cores a late rank makes 15 wait, each of which then yielded and was
// late in turn: the suspected cause of the all-reduce's p99 there, 12-15 us
// against a median of 1.5 (not yet measured there). Ranks that are
// goroutines of one process (spmdtest, New over net/mem) still yield every
// 1024 rounds: the ranks they wait for may need this processor (with 50 us,
// strategies/zero's tests took 6.3-7.6 s against 2.2-3.6). So does a rank
// with GOMAXPROCS 1, whose yields wake no thread (there is no idle
// processor) and whose other goroutines have no other processor to run on.
const sharedYield = 50 * time.Microsecond

// yieldRarely says whether WaitShared yields once per sharedYield (a
// variable for a test).
var yieldRarely = spareProcs.Load

// gosched yields the Go processor from WaitShared (a variable for a test).
var gosched = runtime.Gosched

// reached reports whether the count in word has reached want.
func reached(word *atomic.Uint32, want uint32) bool {
	return int32(word.Load()-want) >= 0
}

// sharedNap is how long WaitShared sleeps before it looks at its context
// and its peer again, when nothing woke it (a variable for a test).
var sharedNap = 20 * time.Millisecond

// waitErr says why WaitShared is to stop waiting for r, if it is. A rank
// may store its word and leave at once, as the last rank of a barrier
// does: so the word is looked at again after r is seen lost.
func (c *Comm) waitErr(done <-chan struct{}, ctx context.Context, r int, word *atomic.Uint32, want uint32) error {
	select {
	case <-done:
		return context.Cause(ctx)
	default:
	}
	if err := c.Lost(r); err != nil && !reached(word, want) {
		return err
	}
	return nil
}

// wakeShared wakes the ranks sleeping in WaitShared on word.
func wakeShared(word *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWake, 1<<30, 0, 0, 0)
}

// Futex operations, without FUTEX_PRIVATE_FLAG: the word is in memory that
// other processes map.
const (
	futexWait = 0
	futexWake = 1
)

// futexWaiter blocks on a word without allocating: the kernel reads the
// timeout through a pointer.
type futexWaiter struct{ ts unix.Timespec }

func (w *futexWaiter) wait(word *atomic.Uint32, val uint32, d time.Duration) {
	w.ts = unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWait, uintptr(val), uintptr(unsafe.Pointer(&w.ts)), 0, 0)
}
