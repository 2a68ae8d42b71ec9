package slurmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// MaxNodes is the most nodes one cluster has.
const MaxNodes = 16

// readyTimeout bounds how long New waits for every node to be idle.
const readyTimeout = 30 * time.Second

// seq numbers the clusters of this process, for unique dir names.
var seq atomic.Uint32

// Cluster is a running Slurm cluster: munged, slurmctld and one slurmd per
// node, all on this machine. Its methods may be called from several
// goroutines; Close must not run concurrently with the others.
type Cluster struct {
	Conf        string   // slurm.conf; SLURM_CONF in Env
	Nodes       []string // n1..nN, each with CPUs CPUs, all in Partition
	Dir         string   // the rig's temp dir: configs, state, spool, logs
	Hostname    string   // the hostname every node reports (the machine's)
	MungeSocket string   // the rig's own munged socket

	t         testing.TB
	closeOnce sync.Once
	mu        sync.Mutex // protects following
	daemons   []*daemon
	phases    string // setup timings, for the log
}

// New starts a cluster of n nodes and registers its Close with t.Cleanup.
// It skips the test, with one line, when not root or when Slurm or munge
// are missing and cannot be installed. It returns once sinfo shows every
// node idle.
func New(t testing.TB, n int) *Cluster {
	t.Helper()
	testhost.Admit(t, "slurmtest", n, MaxNodes, "nodes", unavailable)
	start := time.Now()
	sweep()
	c := &Cluster{t: t}
	t.Cleanup(c.Close)
	if err := c.setup(n); err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	t.Logf("slurmtest: %d nodes ready in %v (%s); SLURM_CONF=%s",
		n, time.Since(start).Round(time.Millisecond), c.phases, c.Conf)
	return c
}

// setup writes the configuration and starts the daemons. On error, Close
// undoes what was done.
func (c *Cluster) setup(n int) error {
	host, err := shortHostname()
	if err != nil {
		return err
	}
	c.Hostname = host
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-%d-", dirPrefix, os.Getpid(), seq.Add(1)))
	if err != nil {
		return err
	}
	c.Dir = dir
	if err := os.Chmod(dir, 0o755); err != nil { // munged wants its socket folder readable, not writable, by others
		return err
	}
	for i := 1; i <= n; i++ {
		c.Nodes = append(c.Nodes, fmt.Sprintf("n%d", i))
	}
	c.Conf = filepath.Join(dir, "slurm.conf")
	c.MungeSocket = filepath.Join(dir, "munge", "socket")
	if err := c.makeDirs(); err != nil {
		return err
	}
	t0 := time.Now()
	if err := c.startMunge(); err != nil {
		return err
	}
	t1 := time.Now()
	unlock, err := lock()
	if err != nil {
		return err
	}
	defer unlock() // held until the daemons listen on the ports chosen
	ports, err := freePorts(n + 1)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.Conf, []byte(c.slurmConf(ports[0], ports[1:])), 0o644); err != nil {
		return err
	}
	if err := c.startSlurm(); err != nil {
		return err
	}
	c.phases = fmt.Sprintf("munged %v, slurm %v", t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	return nil
}

// startMunge starts the rig's munged and waits for its socket.
func (c *Cluster) startMunge() error {
	m := filepath.Join(c.Dir, "munge")
	key := filepath.Join(m, "munge.key")
	if err := writeMungeKey(key); err != nil {
		return err
	}
	d, err := c.start("munged", "", "munged", "--foreground", "--num-threads=4",
		"--key-file="+key, "--socket="+c.MungeSocket, "--pid-file="+filepath.Join(m, "munged.pid"),
		"--log-file="+filepath.Join(m, "munged.log"), "--seed-file="+filepath.Join(m, "munged.seed"))
	if err != nil {
		return err
	}
	return poll(10*time.Second, d, func() error {
		_, err := os.Stat(c.MungeSocket)
		return err
	})
}

// startSlurm starts slurmctld and the slurmds and waits until every node
// is idle.
func (c *Cluster) startSlurm() error {
	ds := make([]*daemon, 0, len(c.Nodes)+1)
	d, err := c.start("slurmctld", filepath.Join(c.Dir, "slurmctld.log"), "slurmctld", "-D", "-i", "-f", c.Conf)
	if err != nil {
		return err
	}
	ds = append(ds, d)
	for _, n := range c.Nodes {
		d, err := c.start("slurmd "+n, filepath.Join(c.Dir, "slurmd-"+n+".log"), "slurmd", "-D", "-N", n, "-f", c.Conf)
		if err != nil {
			return err
		}
		ds = append(ds, d)
	}
	var last string
	err = poll(readyTimeout, nil, func() error {
		for _, d := range ds {
			if d.exited() {
				return &fatal{d.failure()}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := c.CommandContext(ctx, "sinfo", "-h", "-N", "-o", "%N %t").CombinedOutput()
		last = strings.TrimSpace(string(out))
		if err != nil {
			return fmt.Errorf("sinfo: %v: %s", err, last)
		}
		idle := 0
		for _, line := range strings.Split(last, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] == "idle" {
				idle++
			}
		}
		if idle != len(c.Nodes) {
			return fmt.Errorf("%d of %d nodes idle; sinfo says %q", idle, len(c.Nodes), last)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the nodes: %w%s", err, tail(filepath.Join(c.Dir, "slurmctld.log")))
	}
	return nil
}

// fatal marks an error that poll must not retry.
type fatal struct{ err error }

func (f *fatal) Error() string { return f.err.Error() }

func (f *fatal) Unwrap() error { return f.err }

// poll calls f until it returns nil, a *fatal error, or timeout passes, or
// d (when not nil) exits.
func poll(timeout time.Duration, d *daemon, f func() error) error {
	deadline := time.Now().Add(timeout)
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		if d != nil && d.exited() {
			return d.failure()
		}
		err := f()
		var ft *fatal
		if err == nil || errors.As(err, &ft) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(delay)
	}
}
