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
	"time"
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

	bell     atomic.Uint32 // futex word: bumped to wake the owner's receiver from a nap
	sleeping atomic.Uint32 // while the receiver may sleep: napping, or sleeping on the doorbell
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

// segment is one mapped segment file, with its doorbell.
//
// The doorbell is a FIFO beside the file (bellPath), mode 0600 like it:
// once a nap on the header's futex word (napFor) has passed with nothing,
// the owner's receiver sleeps reading it, and the peers ring it by writing
// a byte, each through a descriptor of its own (bell); the owner holds it
// open for reading too, so that writes never block or fail for want of a
// reader. The receiver used to sleep on the futex word alone, 150 ms at a
// time. A goroutine blocked in a futex syscall holds its processor; after
// 10 ms the Go runtime's sysmon takes it back, and from then polls every
// 20 us for a millisecond before it backs off to 10 ms again: the
// receivers woke each idle rank about 300 times a second (an idle Open MPI
// job wakes none), and each wake took a core from the ranks when every
// core runs one. Reading a FIFO parks the goroutine in the runtime's
// poller instead, which holds no processor; but its ring reaches the
// receiver later than a futex wake does, hence the nap first.
type segment struct {
	path     string
	mem      []byte
	hdr      *segHeader
	ringSize int
	rings    int
	bell     int      // the doorbell, open for writing; -1 once unmapped
	listen   *os.File // the owner's: the doorbell open for reading; nil for peers
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

// bellPath names the doorbell of the segment at path.
func bellPath(path string) string { return path + ".bell" }

// createSegment makes the segment at path with the given rings, owned by
// this process, readable by this user only, and its doorbell. It is built
// under a temporary name and renamed into place once the doorbell exists,
// so that peers never map a half-made one.
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
		if err = s.makeBell(); err == nil {
			if err = unix.Rename(tmp, path); err != nil {
				err = fmt.Errorf("renaming %s: %w", tmp, err)
			}
		}
		if err != nil {
			s.unmap()
			unix.Unlink(bellPath(path))
		}
	}
	if err != nil {
		unix.Unlink(tmp)
		return nil, err
	}
	return s, nil
}

// makeBell creates the owner's doorbell and opens it for reading (without
// blocking, so that the runtime's poller waits for it) and for writing.
func (s *segment) makeBell() error {
	path := bellPath(s.path)
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	rfd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		if err = unix.Fchmod(rfd, 0o600); err != nil { // in spite of the umask
			unix.Close(rfd)
		}
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	s.listen = os.NewFile(uintptr(rfd), path)
	if s.bell, err = unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		s.bell = -1
		return fmt.Errorf("opening %s: %w", path, err)
	}
	return nil
}

// openBell opens the doorbell of a peer's segment for writing, if it is a
// FIFO of this user with mode 0600.
func (s *segment) openBell() error {
	path := bellPath(s.path)
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// ENXIO: nobody holds it open for reading, its owner is gone.
		return fmt.Errorf("opening %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Mode&0o777 != 0o600 || int(st.Uid) != os.Geteuid() {
		unix.Close(fd)
		return fmt.Errorf("%w: %s has mode %#o and owner %d", errAuth, path, st.Mode, st.Uid)
	}
	s.bell = fd
	return nil
}

// mapSegment sizes the file behind fd (if it is new) and maps it.
func mapSegment(fd int, path string, rings, ringSize int) (*segment, error) {
	mem, err := sizeAndMap(fd, path, segmentSize(rings, ringSize))
	if err != nil {
		return nil, err
	}
	return &segment{path: path, mem: mem, hdr: (*segHeader)(unsafe.Pointer(&mem[0])), ringSize: ringSize, rings: rings, bell: -1}, nil
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
	s := &segment{path: path, mem: mem, hdr: (*segHeader)(unsafe.Pointer(&mem[0])), ringSize: ringSize, rings: rings, bell: -1}
	if s.hdr.magic != segMagic || !hmac.Equal(s.hdr.mac[:], mac[:]) {
		s.unmap()
		return nil, fmt.Errorf("%w: %s", errAuth, path)
	}
	if err := s.openBell(); err != nil {
		// An owner that closed its transport meanwhile removes its
		// doorbell: say that, not what opening the bell ran into.
		if s.hdr.state.Load() == stateClose {
			err = errPeerClosed
		}
		s.unmap()
		return nil, err
	}
	return s, nil
}

// unmap unmaps the segment and closes its doorbell.
func (s *segment) unmap() {
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem, s.hdr = nil, nil
	}
	if s.bell >= 0 {
		unix.Close(s.bell)
		s.bell = -1
	}
	if s.listen != nil {
		s.listen.Close()
		s.listen = nil
	}
}

// unlink removes the segment's file and its doorbell's.
func (s *segment) unlink() error {
	return errors.Join(unix.Unlink(s.path), unix.Unlink(bellPath(s.path)))
}

// ringBell wakes the segment owner's receiver if it may be asleep and no
// goroutine of the owner is polling: one that stops polling polls once
// more after saying so (EndPoll), so a message published before this
// check is not left waiting.
func (s *segment) ringBell() {
	if s.hdr.pollers.Load() > 0 {
		return
	}
	if v := s.hdr.sleeping.Load(); v != awake && s.hdr.sleeping.CompareAndSwap(v, awake) {
		if v == napping {
			s.hdr.bell.Add(1)
			wake(&s.hdr.bell)
		} else {
			s.knock()
		}
	}
}

// alarm wakes the owner's receiver unconditionally, for state changes.
func (s *segment) alarm() {
	s.hdr.bell.Add(1)
	wake(&s.hdr.bell)
	s.knock()
}

// knock writes a byte to the doorbell. A full FIFO (64 KiB of rings the
// receiver has not read) already wakes it.
func (s *segment) knock() {
	b := [1]byte{1}
	unix.Write(s.bell, b[:])
}

// The receiver's states (segHeader.sleeping).
const (
	awake   = 0
	napping = 1 // in a futex wait on bell, for at most napFor
	asleep  = 2 // reading the doorbell (segment.sleep)
)

// sleep blocks the owner's receiver until the doorbell rings or d
// passes, and reports whether d passed.
func (s *segment) sleep(d time.Duration) bool {
	var b [64]byte // the rings since the last sleep, at once
	s.listen.SetReadDeadline(time.Now().Add(d))
	_, err := s.listen.Read(b[:])
	return errors.Is(err, os.ErrDeadlineExceeded)
}
