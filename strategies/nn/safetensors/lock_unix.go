//go:build unix

package safetensors

import (
	"errors"
	"os"
	"syscall"
)

// lockTemp takes an exclusive advisory lock (flock) on tmp, a temporary
// file this process writes, and holds it until tmp is closed: the process
// dying releases it too, which is how removeStale tells a temporary file
// left by a crash from one being written. It waits while a removeStale
// holds the lock. An error means the file system has no such locks.
func lockTemp(tmp *os.File) error {
	for {
		err := syscall.Flock(int(tmp.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// tryLock takes f's lock if no process holds it, and says whether it did:
// false while its writer lives, and where the file system has no locks.
func tryLock(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// closeBeforeRename is false: the temporary file stays open, and locked,
// until it has its final name.
const closeBeforeRename = false
