package slurmtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slurmPrefixes start the variables Env drops from the test's environment,
// so that a test run inside a Slurm job talks only to the rig.
var slurmPrefixes = []string{"SLURM_", "SALLOC_", "SBATCH_", "SRUN_", "SINFO_", "SQUEUE_", "SCONTROL_"}

// Env returns the environment for commands run against the cluster: the
// test process's environment without the Slurm variables it may have
// inherited, plus SLURM_CONF naming the rig's slurm.conf.
func (c *Cluster) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range slurmPrefixes {
			if strings.HasPrefix(kv, p) {
				keep = false
				break
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return append(env, "SLURM_CONF="+c.Conf)
}

// Command returns a command for the cluster, not yet started: name (srun,
// salloc, sbatch, ... or any program) run with Env, in Dir (where sbatch
// writes its slurm-JOB.out files), in a process group of its own that dies
// with the test binary.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	c.prepare(cmd)
	return cmd
}

// CommandContext is Command bound to ctx: when ctx is done the command's
// whole process group is killed, and Wait returns at most 5 s later even
// if something the command started still holds its output open.
func (c *Cluster) CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	c.prepare(cmd)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func (c *Cluster) prepare(cmd *exec.Cmd) {
	cmd.Env = c.Env()
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Run runs name with args against the cluster, killing its process group
// after timeout, and returns its standard output. It fails the test,
// showing standard error, if the command fails or times out.
func (c *Cluster) Run(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stderr strings.Builder
	cmd := c.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// DaemonPids lists the pids of the daemons the rig started (munged,
// slurmctld, the slurmds) that are still running.
func (c *Cluster) DaemonPids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	for _, d := range c.daemons {
		if !d.exited() {
			pids = append(pids, d.cmd.Process.Pid)
		}
	}
	return pids
}

// Pids lists the processes of the cluster's jobs: every process other than
// the rig's daemons whose environment names the rig's slurm.conf
// (slurmstepd, the tasks, srun, salloc), and their descendants. A test
// checks that nothing of a job is left by waiting for it to be empty.
func (c *Cluster) Pids() []int {
	daemons := map[int]bool{}
	for _, pid := range c.DaemonPids() {
		daemons[pid] = true
	}
	var pids []int
	for _, pid := range matching(c.ownConf) {
		if !daemons[pid] && !c.helper(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// helper reports whether pid is a helper the daemons keep for their own
// use (slurmctld's slurmscriptd), not part of a job.
func (c *Cluster) helper(pid int) bool {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(comm)) == "slurmscriptd"
}

func (c *Cluster) ownConf(conf string) bool { return conf == c.Conf }

// Close stops the daemons the rig started, by pid (SIGTERM, then SIGKILL),
// kills every process left by the cluster's jobs, and removes the temp
// dir. It is idempotent; New registers it with t.Cleanup. Failures are
// reported with t.Errorf.
func (c *Cluster) Close() { c.closeOnce.Do(c.teardown) }

// teardown is Close's work, done once.
func (c *Cluster) teardown() {
	c.mu.Lock()
	daemons := c.daemons
	c.mu.Unlock()

	var errs []error
	if c.Conf != "" {
		errs = append(errs, killAll(c.Pids)) // the jobs first, while their daemons still run
	}
	// The slurm daemons together, munged (which they use to say goodbye) last.
	done := make(chan struct{})
	n := 0
	for _, d := range daemons {
		if d.name != "munged" {
			n++
			go func() { d.stop(); done <- struct{}{} }()
		}
	}
	for range n {
		<-done
	}
	for _, d := range daemons {
		if d.name == "munged" {
			d.stop()
		}
	}
	if c.Conf != "" {
		errs = append(errs, killAll(func() []int { return matching(c.ownConf) })) // slurmscriptd, whatever the daemons left
	}
	if c.Dir != "" {
		errs = append(errs, os.RemoveAll(c.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		c.t.Errorf("slurmtest: closing the cluster: %v", err)
	}
}
