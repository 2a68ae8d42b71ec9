package spmd

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/spmd/release"
)

// PublishShared stores v in *word, a word of shared memory (Shared) that
// other ranks wait on with WaitShared, after every store this rank made
// before it, and wakes the ranks that sleep on it (*sleepers, the count
// that WaitShared keeps beside the word).
//
// The store is a release store where the host allows (a plain MOV on
// amd64, STLR on arm64), not Go's sequentially consistent atomic store,
// which on amd64 is an XCHG: that waits until the word's cache line, which
// the waiting rank is reading, is this core's, and with it every store
// before it. A broadcast of 64 B on 2 ranks and 2 cores took 0.48 us with
// the XCHG and 0.29 with the release store (collbench, 5 alternating runs;
// Open MPI 0.26), an all-reduce of 64 B 0.95 against 0.65 (0.58).
//
// A release store may still sit in this core's store buffer when the
// load of *sleepers after it runs, so a rank that is just going to sleep
// could miss it and sleep a whole nap: the sleeper closes that window
// with an asymmetric fence (membarrier, see fence), which makes every
// registered process's pending stores visible. Where the kernel refuses
// membarrier, the stores stay sequentially consistent.
func PublishShared(word, sleepers *atomic.Uint32, v uint32) {
	if asymmetric() {
		release.Store32(word, v)
	} else {
		word.Store(v)
	}
	if sleepers.Load() != 0 {
		wakeShared(word)
	}
}

// The membarrier(2) commands of the asymmetric fence.
const (
	membarrierGlobalExpedited         = 1 << 1
	membarrierRegisterGlobalExpedited = 1 << 2
)

// asymmetric reports whether this process is registered for the
// expedited global membarrier: then a sleeper's fence (fence) reaches
// this process's threads, and PublishShared may use release stores. It
// registers the first time, unless registerEarly has started that: until
// it ends, the answer is no, and the stores stay sequentially consistent,
// instead of waiting for it. Under the race detector, which does not see
// release stores made in assembly, it always says no. Once known, the
// answer is read from a word, inline, as PublishShared calls it at every
// store.
func asymmetric() bool {
	if a := asymmetricKnown.Load(); a != 0 {
		return a == asymmetricYes
	}
	return asymmetricUnknown()
}

// asymmetricUnknown is asymmetric before the registration has ended; apart,
// so that asymmetric stays small enough to inline.
//
//go:noinline
func asymmetricUnknown() bool {
	if registering.Load() {
		return false
	}
	return registerAsymmetric()
}

// registering says that registerEarly has started the registration.
var registering atomic.Bool

// asymmetricKnown is asymmetric's answer once it has one (0 before).
var asymmetricKnown atomic.Uint32

const (
	asymmetricYes = 1 + iota
	asymmetricNo
)

// registerEarly starts the registration in the background, once: Shares
// calls it where the ranks can share memory, which prims asks before a
// job's first collective chooses its algorithm (topo.Detect), ahead of the
// model's probe and the first PublishShared. The registration waits for an
// RCU grace period in the kernel, 4-20 ms on the 2-core VM, which the
// first Shared collective of a job paid when it registered then (a 2-rank
// 8-byte all-reduce took 8-14 ms, then 5 us; Open MPI's first took 15-27
// us). Stores made before it ends are sequentially consistent
// (asymmetric). It used to start as Init began, on every rank with a
// neighbour on its host; but a process cannot exit while a thread of its
// waits in that syscall (uninterruptible, for the grace period), so a
// short job that made no Shared collective, such as the launch benchmark's
// Init and Barrier, ended 4-15 ms after its last rank returned from main
// (perf: the main thread in membarrier, state D, until rcu_preempt woke
// it), most of the time from its ranks' end to gorun's.
func registerEarly() {
	if registering.Swap(true) {
		return
	}
	go registerAsymmetric()
}

// registerAsymmetric registers this process for the expedited global
// membarrier, once, and keeps the answer in asymmetricKnown.
var registerAsymmetric = sync.OnceValue(func() bool {
	ok := false
	if !raceEnabled {
		_, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterGlobalExpedited, 0, 0)
		ok = errno == 0
	}
	if ok {
		asymmetricKnown.Store(asymmetricYes)
	} else {
		asymmetricKnown.Store(asymmetricNo)
	}
	return ok
})

// fence makes the stores that the threads of every registered process
// have made visible before it returns: WaitShared calls it after counting
// itself among a word's sleepers and before it looks at the word for the
// last time, so that a PublishShared that missed the count has its store
// seen. Processes that could not register store sequentially
// consistently, for which the sleeper's own atomic count is fence enough.
// While this process's own registration is under way, it fences all the
// same: the command needs no registration of the caller, and the ranks it
// waits for may have theirs already.
func fence() {
	if asymmetric() || registrationPending() {
		unix.Syscall(unix.SYS_MEMBARRIER, membarrierGlobalExpedited, 0, 0)
	}
}

// registrationPending reports whether registerEarly's registration is
// under way.
func registrationPending() bool {
	return !raceEnabled && registering.Load() && asymmetricKnown.Load() == 0
}
