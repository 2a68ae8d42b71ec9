package shm

import (
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations. FUTEX_PRIVATE_FLAG is deliberately absent: the words
// live in a shared mapping and the waiter and the waker are different
// processes (or different mappings of one file in a test).
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// DefaultSpin is how many times a waiting side polls, yielding with
// runtime.Gosched between polls, before it blocks on a futex, when the host
// has at least as many cores as ranks. OversubscribedSpin is the count
// when it has fewer: spinning then only steals the core that the awaited
// rank needs, but one Gosched still lets the goroutines that a delivery
// woke run before the receiver blocks in the kernel (blocking at once costs
// about 25 µs a hop, the time the Go runtime takes to hand the blocked
// thread's P to them). Both sized from BenchmarkPingPong8B.
const (
	DefaultSpin        = 100
	OversubscribedSpin = 1
)

// spinWindow is the least time a receiver with the default spin spins
// before it sleeps. A Gosched's cost varies with what the Go scheduler is
// doing: once the receiver slept in the runtime's poller (segment.sleep),
// its 100 Goscheds no longer outlasted an 8-byte round trip between two
// processes, and the receivers of a ping-pong slept at every message:
// 12-14 us a hop against 1.8-2.0 before (BenchmarkPingPong8B/processes=2),
// 2.3 with 1000 Goscheds, 0.8-1.3 with this floor.
const spinWindow = 100 * time.Microsecond

// napFor is how long the receiver sleeps in a futex wait, which a ring
// ends within microseconds, before it sleeps on the doorbell, a FIFO
// (segment.sleep), whose ring takes longer to reach it (8-byte ping-pong
// of two processes, receivers sleeping at once: 35 us a hop against 17).
// It is below the 10 ms after which the Go runtime's sysmon takes the
// processor of a goroutine blocked in a syscall while another processor
// is idle, and then polls every 20 us for a while (segment). Where every
// other processor is busy (GOMAXPROCS 2 beside a running main goroutine)
// sysmon takes it at its next tick all the same; on a bound rank the
// launcher's timer slack (spmd/launch/slack.go) keeps that polling cheap.
const napFor = 5 * time.Millisecond

// checkEvery is the period of the liveness checks: a futex wait times out
// after it, and a busy receiver checks its peers this often.
const checkEvery = 150 * time.Millisecond

// waiter holds what one goroutine needs to block on a futex without
// allocating: the timeout is passed to the kernel by pointer.
type waiter struct {
	ts unix.Timespec
}

// wait blocks while *word == val, for at most d. It reports whether it
// timed out; a wake, a changed word or an interruption all return false.
func (w *waiter) wait(word *atomic.Uint32, val uint32, d time.Duration) bool {
	w.ts = unix.NsecToTimespec(int64(d))
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWaitOp,
		uintptr(val), uintptr(unsafe.Pointer(&w.ts)), 0, 0)
	return e == unix.ETIMEDOUT
}

// wake wakes every process blocked on word.
func wake(word *atomic.Uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(word)), futexWakeOp, 1<<30, 0, 0, 0)
}

// process is a handle on a peer's process for liveness checks. A pidfd
// keeps naming the same process even if its pid is reused, and turns
// readable as soon as the process exits, even while it is an unreaped
// zombie (which kill(pid, 0) still finds). Where pidfd_open is missing,
// kill(pid, 0) is the fallback.
type process struct {
	pid int // 0 in the zero value: no process, nothing to close
	fd  int // pidfd, or -1; meaningless while pid is 0
	pfd [1]unix.PollFd
}

func openProcess(pid int) process {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		fd = -1
	}
	return process{pid: pid, fd: fd, pfd: [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}}
}

// alive reports whether the process still runs. Only a definite answer
// counts as dead: an exit seen through the pidfd, or "no such process".
func (p *process) alive() bool {
	if p.fd >= 0 {
		p.pfd[0].Revents = 0
		n, err := unix.Poll(p.pfd[:], 0)
		return err != nil || n == 0
	}
	return !errors.Is(unix.Kill(p.pid, 0), unix.ESRCH)
}

func (p *process) close() {
	if p.pid > 0 && p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}
