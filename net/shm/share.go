package shm

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

var _ transport.Sharer = (*Transport)(nil)

// shareLabel keys the names of shared areas, as nameLabel keys segments'.
const shareLabel = "gorun/net/shm shared area v1"

// shareHeader is the first cache line of a shared area's file, kept by the
// transport: how many ranks have mapped it. The caller's memory follows.
const shareHeader = 64

// sharePath names the area key of job: the job id for Cleanup, and a tag
// keyed with the secret, so that strangers can neither guess nor plant it.
func sharePath(dir, jobID, key string, secret []byte) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s\x00%s\x00%s", shareLabel, jobID, key)
	return fmt.Sprintf("%s/gorun-%s-s%x", dir, jobID, m.Sum(nil)[:8])
}

// Shares implements transport.Sharer: every rank of ranks is on this host.
func (t *Transport) Shares(ranks []int) bool {
	for _, r := range ranks {
		if _, ok := slices.BinarySearch(t.local, r); !ok {
			return false
		}
	}
	return len(ranks) > 0
}

// Share implements transport.Sharer. Every rank opens the file of key,
// creating it if it is the first, and sizes it (a file that exists is
// already that size, and ftruncate to the same size keeps its bytes); the
// rank that maps it last, as the count in its header says, removes its
// name, so that the memory goes with the last process to exit. A job that
// dies before that leaves the file to Cleanup, as it leaves segments.
func (t *Transport) Share(key string, ranks []int, size int) ([]byte, error) {
	if !t.Shares(ranks) || !slices.Contains(ranks, t.rank) {
		return nil, fmt.Errorf("shm: rank %d cannot share memory with ranks %v (this host has %v)", t.rank, ranks, t.local)
	}
	if size <= 0 {
		return nil, fmt.Errorf("shm: shared area %q of %d bytes", key, size)
	}
	t.shareMu.Lock()
	defer t.shareMu.Unlock()
	if area, ok := t.shares[key]; ok {
		mem := area[shareHeader:]
		if len(mem) != size {
			return nil, fmt.Errorf("shm: shared area %q mapped with %d bytes, asked again with %d", key, len(mem), size)
		}
		return mem, nil
	}
	mem, err := mapShared(sharePath(Dir, t.jobID, key, t.secret), shareHeader+size, len(ranks))
	if err != nil {
		return nil, err
	}
	if t.shares == nil {
		t.shares = make(map[string][]byte)
	}
	t.shares[key] = mem
	return mem[shareHeader : shareHeader+size : shareHeader+size], nil
}

// Unshare implements transport.Sharer. The area's addresses are mapped
// again, at the same place, to private zero pages: its shared pages go
// with the last rank that lets go of them, while a reader that comes late
// reads zeros instead of faulting. Only the addresses stay taken.
func (t *Transport) Unshare(key string) error {
	t.shareMu.Lock()
	defer t.shareMu.Unlock()
	area, ok := t.shares[key]
	if !ok {
		return nil
	}
	delete(t.shares, key)
	_, _, e := unix.Syscall6(unix.SYS_MMAP, uintptr(unsafe.Pointer(&area[0])), uintptr(len(area)),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED, ^uintptr(0), 0)
	if e != 0 {
		return fmt.Errorf("shm: letting go of shared area %q: %w", key, e)
	}
	return nil
}

// mapShared opens or creates the file at path, maps its size bytes and
// counts the mapping; the users-th mapping removes the name.
func mapShared(path string, size, users int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shm: opening shared area %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shm: stat %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG, int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("%w: %s has mode %#o and owner %d", errAuth, path, st.Mode, st.Uid)
	case st.Size != 0 && st.Size != int64(size):
		return nil, fmt.Errorf("%w: %s has %d bytes, want %d (ranks disagree on the area?)", errAuth, path, st.Size, size)
	}
	mem, err := sizeAndMap(fd, path, size)
	if err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	if int((*atomic.Int32)(unsafe.Pointer(&mem[0])).Add(1)) == users {
		unix.Unlink(path) // failing, it leaves the file to Cleanup
	}
	return mem, nil
}
