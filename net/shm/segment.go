package shm

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A segment is one rank's inbox: a file under Dir that the rank creates,
// holding a header and one ring per other rank of its host. Peers map it
// and produce into their ring; the owner consumes from all of them.
//
// Layout: the header at 0, the rings' ctl blocks from metaStart, the rings'
// data from dataStart (page-aligned), each ringSize bytes.
const (
	segMagic   = uint32('g') | uint32('s')<<8 | uint32('S')<<16 | uint32(1)<<24
	metaStart  = 256
	pageSize   = 4096
	macLabel   = "gorun/net/shm segment v1"
	nameLabel  = "gorun/net/shm name v1"
	stateOpen  = 0
	stateClose = 1
)

// segHeader is the start of a segment. The fields up to mac are written
// once, before the segment gets its final name; the rest are shared words.
type segHeader struct {
	magic    uint32
	pid      uint32   // the owner's process id
	ringSize uint64   // bytes of each ring's data
	rings    uint32   // rings in the segment: the other ranks of the host
	_        uint32   //
	mac      [32]byte // HMAC of the job secret over the layout; see segmentMAC
	_        [8]byte

	state    atomic.Uint32 // stateOpen or stateClose
	attached atomic.Uint32 // peers that mapped the segment; at rings, it is unlinked
	_        [56]byte

	bell     atomic.Uint32 // futex word: bumped to wake the owner's receiver
	sleeping atomic.Uint32 // 1 while the receiver may sleep on bell
	pollers  atomic.Int32  // goroutines of the owner polling its rings (Transport.BeginPoll)
	_        [52]byte
}

var _ [metaStart - unsafe.Sizeof(segHeader{})]byte // the header fits

// Errors of attaching to a segment.
var (
	// errNotYet means the peer has not created its segment yet.
	errNotYet = errors.New("segment does not exist yet")
	// errAuth means the segment is not one of this job's, or was made by
	// another user.
	errAuth = errors.New("segment refused: not created by this job (wrong secret, owner or mode)")
)

// segment is one mapped segment file.
type segment struct {
	path     string
	mem      []byte
	hdr      *segHeader
	ringSize int
	rings    int
}

func segmentSize(rings, ringSize int) int {
	return dataStart(rings) + rings*ringSize
}

func dataStart(rings int) int {
	return (metaStart + rings*ctlSize + pageSize - 1) / pageSize * pageSize
}

// ring returns ring i of the segment.
func (s *segment) ring(i int) ring {
	c := (*ctl)(unsafe.Pointer(&s.mem[metaStart+i*ctlSize]))
	off := dataStart(s.rings) + i*s.ringSize
	return newRing(c, s.mem[off:off+s.ringSize:off+s.ringSize])
}

// segmentPath names the segment of rank in job: the job id for Cleanup,
// and a tag keyed with the secret, so that names cannot be guessed by whoever
// lacks it.
func segmentPath(dir, jobID string, rank int, secret []byte) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s\x00%s\x00%d", nameLabel, jobID, rank)
	return fmt.Sprintf("%s/gorun-%s-r%d-%x", dir, jobID, rank, m.Sum(nil)[:8])
}

// segmentMAC authenticates the layout a rank's segment was made with: the
// job, the owner's rank, the ring size and the ranks of the host.
func segmentMAC(secret []byte, jobID string, rank, ringSize int, local []int) [32]byte {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, macLabel)
	io.WriteString(m, jobID)
	var b [8]byte
	for _, v := range append([]int{rank, ringSize, len(local)}, local...) {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		m.Write(b[:])
	}
	var out [32]byte
	m.Sum(out[:0])
	return out
}

// createSegment makes the segment at path with the given rings, owned by
// this process, readable by this user only. It is built under a temporary
// name and renamed into place, so that peers never map a half-made one.
func createSegment(path string, rings, ringSize int, mac [32]byte) (*segment, error) {
	tmp := path + ".new"
	fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", tmp, err)
	}
	defer unix.Close(fd)
	s, err := mapSegment(fd, path, rings, ringSize)
	if err == nil {
		s.hdr.magic = segMagic
		s.hdr.pid = uint32(os.Getpid())
		s.hdr.ringSize = uint64(ringSize)
		s.hdr.rings = uint32(rings)
		s.hdr.mac = mac
		if err = unix.Rename(tmp, path); err != nil {
			s.unmap()
			err = fmt.Errorf("renaming %s: %w", tmp, err)
		}
	}
	if err != nil {
		unix.Unlink(tmp)
		return nil, err
	}
	return s, nil
}

// mapSegment sizes the file behind fd (if it is new) and maps it.
func mapSegment(fd int, path string, rings, ringSize int) (*segment, error) {
	mem, err := sizeAndMap(fd, path, segmentSize(rings, ringSize))
	if err != nil {
		return nil, err
	}
	return &segment{path: path, mem: mem, hdr: (*segHeader)(unsafe.Pointer(&mem[0])), ringSize: ringSize, rings: rings}, nil
}

// sizeAndMap makes the file behind fd readable by this user only, in
// spite of the umask, gives it size bytes (keeping them if it has them)
// and maps them shared.
func sizeAndMap(fd int, path string, size int) ([]byte, error) {
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("sizing %s to %d bytes: %w", path, size, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	return mem, nil
}

// openSegment maps the segment at path if it exists, belongs to this user
// with mode 0600, has the expected layout and carries mac.
func openSegment(path string, rings, ringSize int, mac [32]byte) (*segment, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, errNotYet
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	size := segmentSize(rings, ringSize)
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG, st.Mode&0o777 != 0o600, int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("%w: %s has mode %#o and owner %d", errAuth, path, st.Mode, st.Uid)
	case st.Size != int64(size):
		return nil, fmt.Errorf("%w: %s has %d bytes, want %d (different ring size or host layout?)", errAuth, path, st.Size, size)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	s := &segment{path: path, mem: mem, hdr: (*segHeader)(unsafe.Pointer(&mem[0])), ringSize: ringSize, rings: rings}
	if s.hdr.magic != segMagic || !hmac.Equal(s.hdr.mac[:], mac[:]) {
		s.unmap()
		return nil, fmt.Errorf("%w: %s", errAuth, path)
	}
	return s, nil
}

func (s *segment) unmap() {
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem, s.hdr = nil, nil
	}
}

// ringBell wakes the segment owner's receiver if it may be asleep and no
// goroutine of the owner is polling: one that stops polling polls once
// more after saying so (EndPoll), so a message published before this
// check is not left waiting.
func (s *segment) ringBell() {
	if s.hdr.pollers.Load() > 0 {
		return
	}
	if s.hdr.sleeping.Load() != 0 && s.hdr.sleeping.CompareAndSwap(1, 0) {
		s.hdr.bell.Add(1)
		wake(&s.hdr.bell)
	}
}

// alarm wakes the owner's receiver unconditionally, for state changes.
func (s *segment) alarm() {
	s.hdr.bell.Add(1)
	wake(&s.hdr.bell)
}
