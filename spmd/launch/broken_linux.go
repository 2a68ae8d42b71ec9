package launch

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// closedPipe reports whether w is a file whose reader has gone: a pipe or
// socket that poll(2) says is in error. A SIGPIPE names no descriptor,
// and gorun gets one for a rank's stdin pipe too (--stdin all, a rank
// that exits without reading it); this tells its own output apart.
func closedPipe(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLOUT}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLERR != 0
}
