package tcp

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// readySet is an epoll set of the up connections, level-triggered, that
// Poll asks which connections have something to read, in one system call,
// instead of reading every connection: at np 4 a poll read 3 sockets and
// found 2 of them empty (EAGAIN; strace counted 5.1 empty reads of 6.8 per
// 8-byte all-reduce). It is apart from Go's netpoller, which
// watches the same sockets edge-triggered for the reader goroutines.
//
// A connection's descriptor leaves the set when it is closed. When a
// connection could not be added, or the set could not be made, Poll reads
// every connection, as it did before the set.
type readySet struct {
	fd       int          // the epoll descriptor, -1 if there is none
	complete atomic.Bool  // every up connection is in the set
	n        atomic.Int32 // connections added
	mu       sync.Mutex   // held by the poller that uses events
	events   []unix.EpollEvent
}

// minReady is the fewest connections for which Poll asks the set: with
// one, the call is a system call more than the read it saves. Alternating
// runs of an 8-byte all-reduce over TCP on 2 cores, 5000 calls: np 4 (3
// connections) 53-59 us reading each, 47-59 (median 50.6 against 54.4)
// asking the set; np 2 (one) 7.9-8.0 against 8.8 us.
const minReady = 3

func newReadySet(peers int) *readySet {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return &readySet{fd: -1}
	}
	s := &readySet{fd: fd, events: make([]unix.EpollEvent, max(1, peers))}
	s.complete.Store(true)
	return s
}

// add puts r's connection in the set, as peer rank.
func (s *readySet) add(r *reader, rank int) {
	if s == nil || s.fd < 0 {
		return
	}
	var err error
	cerr := r.rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(rank)}
		err = unix.EpollCtl(s.fd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if cerr != nil || err != nil {
		s.complete.Store(false)
	}
	s.n.Add(1)
}

// wait returns the ranks whose connections have something to read now
// (or have failed), and true; or false when the set cannot answer: it is
// incomplete, another poller is using it, or the call failed. The caller
// must call done after using the answer.
func (s *readySet) wait() ([]unix.EpollEvent, bool) {
	if s == nil || s.fd < 0 || s.n.Load() < minReady || !s.complete.Load() || !s.mu.TryLock() {
		return nil, false
	}
	n, err := unix.EpollWait(s.fd, s.events, 0)
	if err != nil {
		s.mu.Unlock()
		return nil, false
	}
	return s.events[:n], true
}

func (s *readySet) done() { s.mu.Unlock() }

func (s *readySet) close() {
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
}
