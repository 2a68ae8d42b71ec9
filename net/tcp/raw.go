package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawRead and rawWritev are read(2) and writev(2) on a non-blocking
// socket, made without telling Go's scheduler (RawSyscall): they never
// block, so the Go processor need not be handed to another thread while
// they run. With unix.Read and unix.Writev, a call that copies a large
// segment (a 1 MiB read or write takes longer than sysmon's 20 us) had its
// processor taken away and given to a new thread, and got it back only
// after a wake-up: a 16 MiB ring all-reduce over TCP at np 2 made about
// 260 context switches, against Open MPI's 7.

// rawRead reads into p.
func rawRead(fd int, p []byte) (int, unix.Errno) {
	if len(p) == 0 {
		return 0, 0
	}
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

// rawWritev writes the non-empty buffers of iov, in order, with one
// writev.
func rawWritev(fd int, iov [][]byte) (int, unix.Errno) {
	var vec [2]unix.Iovec
	k := 0
	for _, b := range iov {
		if len(b) == 0 {
			continue
		}
		vec[k].Base = &b[0]
		vec[k].SetLen(len(b))
		k++
	}
	if k == 0 {
		return 0, 0
	}
	n, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&vec[0])), uintptr(k))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
