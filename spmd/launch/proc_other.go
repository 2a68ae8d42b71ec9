//go:build !linux

package launch

import "syscall"

// sysProcAttr puts a rank in its own process group, so that a signal to the
// group reaches its children.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
