package launch

import "syscall"

// buildProcAttr puts the build in a process group of its own, and has the
// kernel send its first process SIGTERM when gorun dies: the shell of
// buildScript then kills the group.
func buildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
