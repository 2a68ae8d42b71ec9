package launch

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ttyStdin says whether gorun's standard input f is a terminal, which
// ttyReader then reads, so that a job started in the background (gorun
// ... &) runs instead of stopping at its first read: a background process
// that reads its terminal is sent SIGTTIN, which stopped gorun before it
// had started every rank, and again at each SIGCONT. As Open MPI's mpirun
// does, gorun reads its terminal only while its process group is the
// terminal's foreground one, and looks again every backgroundPoll
// otherwise (fg brings the reading back). SIGTTIN is ignored, so a read
// that the job's move to the background interrupts fails with EIO instead
// of stopping gorun, and is tried again.
func ttyStdin(f *os.File) bool {
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return false
	}
	signal.Ignore(syscall.SIGTTIN)
	return true
}

// backgroundPoll is how often a job in the background looks whether it
// has its terminal back.
const backgroundPoll = 200 * time.Millisecond

// foreground says whether this process's group owns terminal f.
func foreground(f *os.File) bool {
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err != nil || pgrp == unix.Getpgrp()
}

// ttyReader reads a terminal only while in the foreground.
type ttyReader struct{ f *os.File }

func (r ttyReader) Read(p []byte) (int, error) {
	for {
		if !foreground(r.f) {
			time.Sleep(backgroundPoll)
			continue
		}
		n, err := r.f.Read(p)
		if n == 0 && errors.Is(err, syscall.EIO) && !foreground(r.f) {
			continue // moved to the background while it read
		}
		return n, err
	}
}
