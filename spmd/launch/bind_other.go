//go:build !linux

package launch

import (
	"errors"
	"os/exec"
)

var errNoBind = errors.New("--bind-to needs Linux (sched_setaffinity)")

func hostCPUs() ([]cpuInfo, error) { return nil, errNoBind }

func startBound(*exec.Cmd, []int) error { return errNoBind }
