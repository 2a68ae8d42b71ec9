package shm

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// watchExit has a goroutine wait in the Go runtime's poller for the
// process behind pidfd, a peer's, to exit, and then wake the receiver to
// check its peers (Transport.exited). Once every peer is so watched, the
// receiver asleep on its doorbell needs no timer for its liveness checks
// (idleSleep): the 150 ms timer woke each idle rank about 30 times a second
// (the poller's thread, the receiver and the runtime's threads it wakes).
// A pidfd the poller cannot wait for leaves the peer to the timer. The
// peers are watched from their attach (tryAttach), so that the goroutines
// are there before a program counts its own.
func (t *Transport) watchExit(pidfd int) {
	fd, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return
	}
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	if t.closing.Load() {
		f.Close()
		return
	}
	t.watches = append(t.watches, f)
	t.watched.Add(1)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		err := rc.Read(func(fd uintptr) bool { // true once the process exited
			pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(pfd[:], 0)
			return n > 0
		})
		if t.closing.Load() {
			return // Close closed f
		}
		if err != nil { // not pollable after all: back to the timer
			t.watched.Add(-1)
		}
		t.exited.Store(true)
		t.seg.alarm()
	}()
}

// stopWatches ends the goroutines of watchExit, for Close.
func (t *Transport) stopWatches() {
	t.watchMu.Lock()
	defer t.watchMu.Unlock()
	for _, f := range t.watches {
		f.Close()
	}
	t.watches = nil
}

// idleSleep is how long the receiver sleeps on its doorbell with nothing
// to do: checkEvery while a peer's exit is not watched, else idleCheck.
func (t *Transport) idleSleep() time.Duration {
	if int(t.watched.Load()) >= len(t.order) {
		return idleCheck
	}
	return checkEvery
}

// idleCheck is how often a receiver whose peers' exits are all watched
// checks them anyway.
const idleCheck = 5 * time.Second
