package slurmtest

import (
	"os/exec"
	"strings"
	"sync"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// The programs the rig runs, and the packages that bring them.
var (
	needed    = []string{"munged", "slurmctld", "slurmd", "sinfo", "srun", "salloc", "sbatch", "scancel"}
	packages  = []string{"slurmctld", "slurmd", "slurm-client", "munge"}
	checkOnce sync.Once
	skipWhy   string // set by checkOnce: why no cluster can be built here
)

// unavailable returns why no cluster can be built here, or "" when one can.
// It installs missing packages when root, once per process.
func unavailable() string {
	checkOnce.Do(func() { skipWhy = check() })
	return skipWhy
}

func check() string {
	if reason := testhost.NeedRoot("run slurmd and munged"); reason != "" {
		return reason
	}
	return testhost.Provide(missing, strings.Join(packages, " "), packages...)
}

// missing names the first program the rig needs that is not installed.
func missing() string {
	for _, p := range needed {
		if _, err := lookPath(p); err != nil {
			return p
		}
	}
	return ""
}

// lookPath finds p in PATH or, for daemons when PATH lacks the sbin
// folders, in /usr/sbin.
func lookPath(p string) (string, error) {
	path, err := exec.LookPath(p)
	if err == nil {
		return path, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		if path, err2 := exec.LookPath(dir + "/" + p); err2 == nil {
			return path, nil
		}
	}
	return "", err
}
