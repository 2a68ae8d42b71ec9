package spmd

import (
	"os"
	"strings"
)

// LocalHostID returns this machine's identity: its hostname and the first
// eight characters of the kernel's boot id, so that two machines (or two
// network-namespace hosts of a test) that share a hostname but not a kernel
// boot still differ. GORUN_HOST_ID overrides it for ranks; launchers that
// know better (Slurm's node name, a hostfile entry) set that.
func LocalHostID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if id := strings.TrimSpace(string(b)); err == nil && len(id) >= 8 {
		return host + ":" + id[:8]
	}
	return host
}
