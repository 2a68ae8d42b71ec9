package launch

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// stdinBuffer is how much of gorun's standard input a rank that is slow
// to read (or does not read) may hold back before reading more of it waits
// for that rank: the others read on meanwhile.
const stdinBuffer = 16 << 20

// forwardStdin copies src to every dst (the ranks' standard inputs,
// --stdin all) and closes each at the end of src. Each dst has its own
// writer and a buffer of up to limit bytes, so that a rank that does not
// read holds back the others only once its buffer is full; a rank that
// has exited (its pipe is closed) is dropped. A read error ends src as
// its end would, and logf says it once: the job goes on, and a rank that
// reads sees its input end there. (It was dropped: "gorun < /tmp" ran its
// ranks on an empty input and exited 0, where "cat < /tmp" says "Is a
// directory" and exits 1.)
func forwardStdin(src io.Reader, dsts []*os.File, limit int, logf func(format string, args ...any)) {
	sinks := make([]*stdinSink, len(dsts))
	for i, d := range dsts {
		sinks[i] = newStdinSink(d, limit)
		go sinks[i].run()
	}
	defer func() {
		for _, s := range sinks {
			s.end()
		}
	}()
	for {
		buf := make([]byte, 32<<10) // each chunk is shared by the sinks
		n, err := src.Read(buf)
		if n > 0 {
			live := false
			for _, s := range sinks {
				live = s.push(buf[:n]) || live
			}
			if !live {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				logf("reading standard input: %v; the ranks' standard input ends there, as at end of file", err)
			}
			return
		}
	}
}

// checkStdin refuses, as a usage error, a standard input f that is a
// directory where the job would read it (--stdin other than none):
// every read of it fails (EISDIR); a shell's "< DIR" made by mistake.
func checkStdin(f *os.File, cfg *Config) error {
	if target, err := cfg.StdinRank(); f == nil || err != nil || target == stdinNone {
		return nil
	}
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() {
		return nil
	}
	name := ""
	if dir, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err == nil {
		name = " (" + dir + ")"
	}
	return errorf(ErrUsage, "standard input is a directory%s, which the ranks cannot read: redirect a file, or give --stdin none", name)
}

// stdinSink is one rank's standard input: a queue of chunks and the
// goroutine (run) that writes them to the rank's pipe.
type stdinSink struct {
	f     *os.File
	limit int
	// written, if set, is called after each write to the pipe, with the
	// chunk's length and the write's error: an agent acknowledges it.
	written func(n int, err error)

	mu   sync.Mutex
	cond *sync.Cond
	// protects following
	q     [][]byte
	size  int  // bytes queued
	ended bool // no more chunks come
	dead  bool // the pipe failed: the rank has gone
}

func newStdinSink(f *os.File, limit int) *stdinSink {
	s := &stdinSink{f: f, limit: limit}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// push queues p, waiting while the queue is full; it reports whether the
// rank still reads.
func (s *stdinSink) push(p []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.dead && s.size > 0 && s.size+len(p) > s.limit {
		s.cond.Wait()
	}
	if s.dead {
		return false
	}
	s.q = append(s.q, p)
	s.size += len(p)
	s.cond.Broadcast()
	return true
}

// end says no more chunks come: run closes the pipe once it has written
// the queue.
func (s *stdinSink) end() {
	s.mu.Lock()
	s.ended = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// stop drops what is queued and closes the pipe, which ends a write
// blocked on it: for a rank being stopped.
func (s *stdinSink) stop() {
	s.mu.Lock()
	s.ended, s.dead, s.q, s.size = true, true, nil, 0
	s.cond.Broadcast()
	s.mu.Unlock()
	s.f.Close()
}

// run writes the queued chunks to the pipe until the end, or until the
// pipe fails, and closes it.
func (s *stdinSink) run() {
	defer s.f.Close()
	for {
		s.mu.Lock()
		for len(s.q) == 0 && !s.ended {
			s.cond.Wait()
		}
		if len(s.q) == 0 {
			s.mu.Unlock()
			return
		}
		p := s.q[0]
		s.q = s.q[1:]
		s.mu.Unlock()
		_, err := s.f.Write(p)
		s.mu.Lock()
		s.size -= len(p)
		if err != nil {
			s.dead, s.q, s.size = true, nil, 0
		}
		s.cond.Broadcast()
		s.mu.Unlock()
		if s.written != nil {
			s.written(len(p), err)
		}
		if err != nil {
			return
		}
	}
}
