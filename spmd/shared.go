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
	budget, check := budgetFor(0, crowded), 255 // a request's budget, for no bytes
	if crowded {
		check = 7
	}
	done := ctx.Done()
	var start time.Time
	for i := 1; ; i++ {
		if reached(word, want) {
			return nil
		}
		if crowded { // as idler does, for the same reasons
			unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			if i%64 == 0 {
				runtime.Gosched()
			}
		} else if i%1024 == 0 {
			runtime.Gosched()
		}
		if i&check != 0 {
			continue
		}
		if err := c.waitErr(done, ctx, r, word, want); err != nil {
			return err
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > budget {
			break
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
