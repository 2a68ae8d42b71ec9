package netnstest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// nsPrefix starts every namespace name: gorunt-<pid>-<seq>-<i>.
const nsPrefix = "gorunt-"

// lockPath serialises subnet choice between concurrent test binaries.
const lockPath = "/run/gorun-netnstest.lock"

// ip runs the ip command and returns its error with its output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ipOut runs the ip command and returns its standard output.
func ipOut(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// makeBridge picks a free /24 of 198.18.0.0/15, creates the bridge with
// the .1 address on it and returns the first three octets ("198.18.7").
// A file lock keeps concurrent rigs from picking the same subnet.
func makeBridge(bridge string) (string, error) {
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lockPath, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	addrs, err := ipOut("-4", "-o", "addr", "show")
	if err != nil {
		return "", err
	}
	routes, err := ipOut("-4", "route", "show", "table", "all")
	if err != nil {
		return "", err
	}
	used := addrs + routes
	const subnets = 512 // the /24s of 198.18.0.0/15
	start := rand.IntN(subnets)
	for k := range subnets {
		s := (start + k) % subnets
		prefix := fmt.Sprintf("198.%d.%d", 18+s/256, s%256)
		if strings.Contains(used, prefix+".") {
			continue
		}
		if err := ip("link", "add", bridge, "type", "bridge"); err != nil {
			return "", err
		}
		if err := ip("link", "set", bridge, "addrgenmode", "none", "up"); err != nil {
			return "", err
		}
		return prefix, ip("addr", "add", prefix+".1/24", "dev", bridge)
	}
	return "", errors.New("every /24 of 198.18.0.0/15 is in use")
}

// addHost creates h's namespace and its veth on the bridge.
func addHost(h RigHost, bridge string) error {
	steps := [][]string{
		{"netns", "add", h.Netns},
		{"link", "add", h.Link, "type", "veth", "peer", "name", "eth0", "netns", h.Netns},
		{"link", "set", h.Link, "master", bridge, "addrgenmode", "none", "up"},
		{"-n", h.Netns, "link", "set", "lo", "up"},
		{"-n", h.Netns, "link", "set", "eth0", "addrgenmode", "none", "up"},
		{"-n", h.Netns, "addr", "add", h.Addr + "/24", "dev", "eth0"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// nsPids lists the processes inside a namespace.
func nsPids(ns string) ([]int, error) {
	out, err := ipOut("netns", "pids", ns)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// emptyNetns kills every process in ns and waits, boundedly, until none is
// left.
func emptyNetns(ns string) error {
	if err := testhost.KillAll(func() ([]int, error) { return nsPids(ns) }); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

var (
	staleNetns = regexp.MustCompile(`^` + nsPrefix + `(\d+)-\d+-(\d+|probe)$`)
	staleDir   = regexp.MustCompile(`^` + nsPrefix + `(\d+)-\d+-\d+$`)
	staleLink  = regexp.MustCompile(`^gr([0-9a-f]+)x[0-9a-f]+[bv]\d*$`)
)

// sweep removes namespaces, links and temp dirs left by rigs of test
// binaries that died without closing them (their pid no longer exists).
func sweep() {
	testhost.SweepDirs(nsPrefix, staleDir, nil)
	if out, err := ipOut("netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			m := staleNetns.FindStringSubmatch(f[0])
			if m == nil || testhost.OwnerAlive(m[1], 10) {
				continue
			}
			_ = emptyNetns(f[0])
			_ = ip("netns", "del", f[0])
		}
	}
	if out, err := ipOut("-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if m := staleLink.FindStringSubmatch(name); m != nil && !testhost.OwnerAlive(m[1], 16) {
				_ = ip("link", "del", name)
			}
		}
	}
}
