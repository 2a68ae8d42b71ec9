package launch

import "syscall"

// sysProcAttr puts a rank in its own process group, so that a signal to the
// group reaches its children, and has the kernel kill it if gorun dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
