package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// The programs the rig runs.
var (
	sshdPath   = "/usr/sbin/sshd"
	needed     = []string{"ip", "ssh", "ssh-keygen", "sh"}
	checkOnce  sync.Once
	skipReason string // set by checkOnce: why rigs cannot be built here
)

// unavailable returns why no rig can be built here, or "" when one can.
// It installs missing packages when root, once per process.
func unavailable() string {
	checkOnce.Do(func() { skipReason = check() })
	return skipReason
}

func check() string {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Sprintf("needs root to create network namespaces (running as uid %d)", uid)
	}
	if missing() != "" {
		if err := install(); err != nil {
			return fmt.Sprintf("%s missing and could not be installed: %v", missing(), err)
		}
		if m := missing(); m != "" {
			return m + " missing after installing iproute2 and openssh-server"
		}
	}
	probe := fmt.Sprintf("%s%d-probe", nsPrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		return fmt.Sprintf("cannot create network namespaces: %s", strings.TrimSpace(string(out)))
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return fmt.Sprintf("sshd needs /run/sshd: %v", err)
	}
	return ""
}

// missing names the first program the rig needs that is not installed.
func missing() string {
	if _, err := os.Stat(sshdPath); err != nil {
		return sshdPath
	}
	for _, p := range needed {
		if _, err := exec.LookPath(p); err != nil {
			return p
		}
	}
	return ""
}

// install runs apt-get install, with an update first if that fails.
func install() error {
	args := []string{"-o", "DPkg::Lock::Timeout=120", "install", "-y", "--no-install-recommends",
		"openssh-server", "openssh-client", "iproute2"}
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
