//go:build !linux

package launch

import "syscall"

// buildProcAttr puts the build in a process group of its own. Without
// Linux's Pdeathsig a build outlives a gorun that was killed.
func buildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
