package launch

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Subreap makes this process the reaper of its descendants' orphans
// (PR_SET_CHILD_SUBREAPER): a rank's daemon, however it detaches (a double
// fork, setsid, a shell's set -m), is re-parented to gorun or the agent
// instead of init, and KillOrphans kills it when the job is over. gorun's
// main and the agent call it first thing; a library user of Launcher need
// not.
func Subreap() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// KillOrphans kills and reaps every child of this process, and the
// children those leave behind, until none is left, and returns how many
// it killed. Call it when the job is over and every rank has been waited
// for: any child left then is a descendant that outlived its rank. It
// first reads this process's children files (ownChildren), a few small
// reads, and returns at once when they list none, the common end of a
// job; only a job that left children has every process read (children):
// 1 ms of every gorun's exit with 67 processes on the development VM, and
// more on a login node that runs thousands.
func KillOrphans() int {
	if len(ownChildren()) == 0 {
		return 0
	}
	self := os.Getpid()
	killed := 0
	for round := 0; round < 100; round++ {
		kids := children(self)
		if len(kids) == 0 {
			break
		}
		for _, pid := range kids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		for _, pid := range kids {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil) // their children come to us next round
		}
	}
	return killed
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppidOf(n) == pid {
			kids = append(kids, n)
		}
	}
	return kids
}

// ownChildren lists this process's children from the children files of
// its threads (/proc/self/task/*/children), a few small reads where
// children reads every process's stat: 0.75 ms with 65 processes on the
// development VM, and reapOrphans runs at every SIGCHLD, one a rank at the
// end of a job. The kernel does not promise that those files list a child
// that comes or goes while they are read: a zombie missed here is reaped
// at the next SIGCHLD, or by KillOrphans. At a job's end nothing comes or
// goes but for a daemon that outlived its rank, which the job's cgroup has
// killed already where there is one.
// Where the kernel has no such files it falls back to children.
func ownChildren() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return children(os.Getpid())
	}
	var kids []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if errors.Is(err, fs.ErrNotExist) && len(kids) == 0 {
			if _, serr := os.Stat("/proc/self/task/" + t.Name()); serr == nil {
				return children(os.Getpid()) // no children files (CONFIG_PROC_CHILDREN)
			}
			continue // the thread is gone
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				kids = append(kids, pid)
			}
		}
	}
	return kids
}

// ppidOf reads the parent of pid from /proc/pid/stat, whose second field
// (the command, in parentheses) may itself hold spaces and parentheses.
func ppidOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return -1
	}
	p, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return -1
	}
	return p
}

// orphanExits delivers a value whenever a child of this process exits,
// while this process is a subreaper (Subreap), so that reapOrphans runs
// when there is something to reap; stop ends the deliveries. Elsewhere it
// returns a nil channel. Scanning /proc for zombies every second instead
// woke gorun and took a few milliseconds of a core each time, from ranks
// that may have every core.
func orphanExits() (exits <-chan os.Signal, stop func()) {
	var on int
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0); err != nil || on == 0 {
		return nil, func() {}
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGCHLD)
	return c, func() { signal.Stop(c) }
}

// reapOrphans reaps the children of this process that have exited and
// that it did not start itself (not in started): descendants of ranks
// that detached and were re-parented here. It does nothing unless this
// process is a subreaper (Subreap): elsewhere every child is someone's to
// wait for.
func reapOrphans(started map[int]bool) {
	var on int
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0); err != nil || on == 0 {
		return
	}
	for _, pid := range ownChildren() {
		if started[pid] || stateOf(pid) != 'Z' {
			continue
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// stateOf reads the state letter of pid from /proc/pid/stat (R, S, Z,
// ...), or 0.
func stateOf(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
