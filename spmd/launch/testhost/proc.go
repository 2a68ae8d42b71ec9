package testhost

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// killLimit bounds how long KillAll keeps killing.
const killLimit = 5 * time.Second

// KillAll SIGKILLs the processes list returns until it returns none, and
// fails when list fails or when processes are left after 5 s.
func KillAll(list func() ([]int, error)) error {
	deadline := time.Now().Add(killLimit)
	for {
		pids, err := list()
		if err != nil || len(pids) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still running after SIGKILL", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive reports whether a process with this pid exists and is not a
// zombie waiting to be reaped.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// OwnerAlive reports whether the process whose pid is written, in base, in
// the name of a rig's leftover is alive. An unparsable pid counts as alive,
// so that what it names is left alone.
func OwnerAlive(pid string, base int) bool {
	p, err := strconv.ParseInt(pid, base, 32)
	return err != nil || Alive(int(p))
}

// SweepDirs removes the temp dirs, named prefix* in os.TempDir(), of rigs
// whose test binary died without closing them: those whose name matches
// stale and whose owner, the decimal pid of stale's first group, is no
// longer alive. It calls before, if not nil, with each such dir first.
func SweepDirs(prefix string, stale *regexp.Regexp, before func(dir string)) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	if err != nil {
		return
	}
	for _, d := range dirs {
		m := stale.FindStringSubmatch(filepath.Base(d))
		if m == nil || OwnerAlive(m[1], 10) {
			continue
		}
		if before != nil {
			before(d)
		}
		_ = os.RemoveAll(d)
	}
}
