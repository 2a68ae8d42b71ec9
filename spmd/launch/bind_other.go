//go:build !linux

package launch

import (
	"errors"
	"os/exec"
)

var errNoBind = errors.New("--bind-to needs Linux (sched_setaffinity)")

func hostCPUs() ([]cpuInfo, error) { return nil, errNoBind }

// startWith starts cmd; binding to CPUs and timer slack need Linux.
func startWith(cmd *exec.Cmd, cpus []int, slack timerSlack) error {
	if cpus != nil {
		return errNoBind
	}
	if slack.d > 0 && !slack.auto {
		return errorf(ErrUsage, "--timer-slack needs Linux (prctl PR_SET_TIMERSLACK); --timer-slack 0 leaves it alone")
	}
	return startCmd(cmd)
}
