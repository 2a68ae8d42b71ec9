package testhost

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for a process's writes and a test's
// reads at once: the stdout or stderr of a command a test watches.
type SyncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
