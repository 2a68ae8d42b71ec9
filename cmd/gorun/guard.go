package main

import (
	"os"

	"github.com/gorun-hpc/gorun/spmd/launch"
)

// guardCommand is how gorun and its agents start the guard of a job's
// cgroup: gorun itself with --cgroup-guard (the cgroup's directory is
// appended). Nil, and no cgroup, when gorun cannot find itself.
func guardCommand() []string {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{self, "--" + flagCgroupGuard}
}

// runGuard is gorun --cgroup-guard DIR: it waits for the end of its
// stdin, a pipe that only the gorun or agent that started it writes, then
// kills and removes the job's cgroup DIR (see launch.RunGuard).
func runGuard(dir string) error {
	if code := launch.RunGuard(dir, os.Stdin, os.Stderr); code != 0 {
		return exitStatus(code)
	}
	return nil
}
