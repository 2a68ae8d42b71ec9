package slurmtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
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
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Sprintf("needs root to run slurmd and munged (running as uid %d)", uid)
	}
	if m := missing(); m != "" {
		if err := install(); err != nil {
			return fmt.Sprintf("%s missing and could not be installed: %v", m, err)
		}
		if m := missing(); m != "" {
			return fmt.Sprintf("%s missing after installing %s", m, strings.Join(packages, " "))
		}
	}
	return ""
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

// install runs apt-get install, with an update first if that fails.
func install() error {
	args := append([]string{"-o", "DPkg::Lock::Timeout=120", "install", "-y", "--no-install-recommends"}, packages...)
	apt := func(args ...string) error {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %v: %s", args[len(args)-1], err, lastLine(out))
		}
		return nil
	}
	if apt(args...) == nil {
		return nil
	}
	if err := apt("-o", "DPkg::Lock::Timeout=120", "update"); err != nil {
		return err
	}
	return apt(args...)
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
