//go:build !linux

package launch

import (
	"errors"
	"os/exec"
	"time"
)

var errNoBind = errors.New("--bind-to needs Linux (sched_setaffinity)")

func hostCPUs() ([]cpuInfo, error) { return nil, errNoBind }

// startWith starts cmd; binding to CPUs and timer slack need Linux.
func startWith(cmd *exec.Cmd, cpus []int, slack time.Duration) error {
	if cpus != nil {
		return errNoBind
	}
	if slack > 0 {
		return errors.New("--timer-slack needs Linux (prctl PR_SET_TIMERSLACK); --timer-slack 0 leaves it alone")
	}
	return cmd.Start()
}
