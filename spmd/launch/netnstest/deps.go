package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
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
	if reason := testhost.NeedRoot("create network namespaces"); reason != "" {
		return reason
	}
	if reason := testhost.Provide(missing, "iproute2 and openssh-server",
		"openssh-server", "openssh-client", "iproute2"); reason != "" {
		return reason
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
