package netnstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// MaxHosts is the most hosts one rig has (one /24 holds them with room).
const MaxHosts = 200

// Slots is the slot count of every host in the rig's hostfile.
const Slots = 2

// seq numbers the rigs of this process, for unique names.
var seq atomic.Uint32

// Rig is a set of namespace hosts with sshd running in each. Its methods
// may be called from several goroutines; Close must not run concurrently
// with the others.
type Rig struct {
	Hosts      []RigHost // h1..hn
	Hostfile   string    // "h1 slots=2" per host
	SSHConfig  string    // ssh client config: ssh -F SSHConfig h1 cmd
	Dir        string    // the rig's temp dir: keys, configs, sshd logs
	Key        string    // the client's private key
	KnownHosts string    // the hosts' public keys, by name and address
	Bridge     string    // the bridge in the root namespace
	BridgeAddr string    // the root namespace's address on the bridge
	Subnet     string    // the rig's network, e.g. 198.18.7.0/24

	t         testing.TB
	closeOnce sync.Once
	mu        sync.Mutex       // protects following
	sshds     map[string]*sshd // by host name
	phases    string           // setup timings, for the log
}

// RigHost is one host of a rig.
type RigHost struct {
	Name  string // h1, h2, ...: the ssh alias and the host's hostname
	Addr  string // its IPv4 address, in the rig's /24 of 198.18.0.0/15
	Netns string // its network namespace, for ip netns exec
	Link  string // the root-namespace end of its veth, on the bridge
}

// New builds a rig of n hosts and registers its Close with t.Cleanup. It
// skips the test, with one line, when not root or when namespaces, ip or
// sshd are unavailable (missing packages are installed when root). It
// returns once every host accepts ssh logins.
func New(t testing.TB, n int) *Rig {
	t.Helper()
	testhost.Admit(t, "netnstest", n, MaxHosts, "hosts", unavailable)
	start := time.Now()
	sweep()
	r := &Rig{t: t, sshds: make(map[string]*sshd)}
	t.Cleanup(r.Close)
	if err := r.setup(n); err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Logf("netnstest: %d hosts on %s ready in %v (%s)", n, r.Subnet, time.Since(start).Round(time.Millisecond), r.phases)
	return r
}

// setup builds the network, keys and sshds. On error, Close undoes what
// was done.
func (r *Rig) setup(n int) error {
	pid, k := os.Getpid(), seq.Add(1)%256
	r.Bridge = fmt.Sprintf("gr%xx%xb", pid, k)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%d-", nsPrefix, pid, k))
	if err != nil {
		return err
	}
	r.Dir = dir
	prefix, err := makeBridge(r.Bridge)
	if err != nil {
		return err
	}
	r.BridgeAddr, r.Subnet = prefix+".1", prefix+".0/24"
	t0 := time.Now()
	for i := 1; i <= n; i++ {
		h := RigHost{
			Name:  fmt.Sprintf("h%d", i),
			Addr:  fmt.Sprintf("%s.%d", prefix, i+1),
			Netns: fmt.Sprintf("%s%d-%d-%d", nsPrefix, pid, k, i),
			Link:  fmt.Sprintf("gr%xx%xv%d", pid, k, i),
		}
		r.Hosts = append(r.Hosts, h)
		if err := addHost(h, r.Bridge); err != nil {
			return err
		}
	}
	t1 := time.Now()
	if err := r.writeFiles(); err != nil {
		return err
	}
	t2 := time.Now()
	for _, h := range r.Hosts {
		s, err := r.startSSHD(h)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.sshds[h.Name] = s
		r.mu.Unlock()
	}
	errs := make([]error, len(r.Hosts))
	var wg sync.WaitGroup
	for i, h := range r.Hosts {
		wg.Go(func() { errs[i] = r.waitReady(h, r.sshds[h.Name]) })
	}
	wg.Wait()
	r.phases = fmt.Sprintf("network %v, keys %v, sshd %v", t1.Sub(t0).Round(time.Millisecond),
		t2.Sub(t1).Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
	return errors.Join(errs...)
}

// writeFiles writes keys, the ssh client config and the hostfile.
func (r *Rig) writeFiles() error {
	if err := r.writeKeys(); err != nil {
		return err
	}
	r.SSHConfig = filepath.Join(r.Dir, "ssh_config")
	if err := os.WriteFile(r.SSHConfig, []byte(r.clientConfig()), 0o600); err != nil {
		return err
	}
	var hf strings.Builder
	for _, h := range r.Hosts {
		fmt.Fprintf(&hf, "%s slots=%d\n", h.Name, Slots)
	}
	r.Hostfile = filepath.Join(r.Dir, "hostfile")
	return os.WriteFile(r.Hostfile, []byte(hf.String()), 0o600)
}

// SSHArgs returns the ssh options that log into the rig's hosts
// non-interactively: ssh SSHArgs()... h1 cmd.
func (r *Rig) SSHArgs() []string { return []string{"-F", r.SSHConfig} }

// Host returns the host named name (h1..hn).
func (r *Rig) Host(name string) (RigHost, error) {
	for _, h := range r.Hosts {
		if h.Name == name {
			return h, nil
		}
	}
	return RigHost{}, fmt.Errorf("netnstest: no host %q in the rig (have h1..h%d)", name, len(r.Hosts))
}

// Command returns a command that runs argv inside host's network
// namespace (ip netns exec), not yet started. It runs in the machine's UTS
// namespace; use SSHCommand to run as a login on the host.
func (r *Rig) Command(host string, argv ...string) *exec.Cmd {
	h, err := r.Host(host)
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.Netns}, argv...)...)
	if err != nil {
		cmd.Err = err
	}
	return cmd
}

// SSHCommand returns ssh SSHArgs() host argv..., not yet started.
func (r *Rig) SSHCommand(host string, argv ...string) *exec.Cmd {
	return exec.Command("ssh", append(append(r.SSHArgs(), host), argv...)...)
}

// Run runs argv inside host's network namespace and returns its standard
// output; it fails the test, showing standard error, if the command fails.
func (r *Rig) Run(t testing.TB, host string, argv ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := r.Command(host, argv...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("on %s: %s: %v\n%s%s", host, strings.Join(argv, " "), err, out, stderr.String())
	}
	return string(out)
}

// KillLink sets host's link down, so that it no longer answers: new
// connections time out and established ones stall.
func (r *Rig) KillLink(host string) error { return r.setLink(host, "down") }

// RestoreLink undoes KillLink.
func (r *Rig) RestoreLink(host string) error { return r.setLink(host, "up") }

func (r *Rig) setLink(host, state string) error {
	h, err := r.Host(host)
	if err != nil {
		return err
	}
	return ip("link", "set", h.Link, state)
}

// SSHDPid returns the pid of host's sshd listener, or 0 if it is not
// running.
func (r *Rig) SSHDPid(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.sshds[host]; s != nil && s.cmd.Process != nil {
		return s.cmd.Process.Pid
	}
	return 0
}

// Pids lists the processes running inside host's namespace other than its
// sshd listener: the sessions and whatever they started. A test checks
// that nothing of a job is left by waiting for it to be empty.
func (r *Rig) Pids(host string) ([]int, error) {
	h, err := r.Host(host)
	if err != nil {
		return nil, err
	}
	all, err := nsPids(h.Netns)
	if err != nil {
		return nil, err
	}
	listener := r.SSHDPid(host)
	pids := all[:0]
	for _, p := range all {
		if p != listener {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Close kills the rig's sshds (by pid) and every process left in its
// namespaces, then deletes the namespaces, links, bridge and temp dir. It
// is idempotent; New registers it with t.Cleanup. Failures are reported
// with t.Errorf.
func (r *Rig) Close() { r.closeOnce.Do(r.teardown) }

// teardown is Close's work, done once.
func (r *Rig) teardown() {
	r.mu.Lock()
	sshds := r.sshds
	r.mu.Unlock()

	var errs []error
	for _, s := range sshds {
		s.stop()
	}
	for _, h := range r.Hosts {
		if !netnsExists(h.Netns) {
			continue
		}
		if err := emptyNetns(h.Netns); err != nil {
			errs = append(errs, err)
		}
		if err := ip("link", "del", h.Link); err != nil && linkExists(h.Link) {
			errs = append(errs, err)
		}
		if err := ip("netns", "del", h.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	if r.Bridge != "" && linkExists(r.Bridge) {
		errs = append(errs, ip("link", "del", r.Bridge))
	}
	if r.Dir != "" {
		errs = append(errs, os.RemoveAll(r.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		r.t.Errorf("netnstest: closing the rig: %v", err)
	}
}

func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", name).Run() == nil
}
