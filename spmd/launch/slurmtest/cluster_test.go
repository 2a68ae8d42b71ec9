package slurmtest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/hosts"
	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// cmdTimeout bounds every Slurm command of these tests.
const cmdTimeout = time.Minute

func TestCluster(t *testing.T) {
	c := New(t, 3)
	if !slices.Equal(c.Nodes, []string{"n1", "n2", "n3"}) {
		t.Fatalf("Nodes = %v; want n1 n2 n3", c.Nodes)
	}

	// Each task learns its node from Slurm; the hostname is the machine's.
	out := c.Run(t, cmdTimeout, "srun", "-N3", "-n3", "printenv", "SLURMD_NODENAME")
	if got := sortedLines(out); !slices.Equal(got, c.Nodes) {
		t.Errorf("srun -N3 -n3 printenv SLURMD_NODENAME = %q; want n1 n2 n3", got)
	}
	out = c.Run(t, cmdTimeout, "srun", "-N3", "-n6", "hostname")
	if got := sortedLines(out); !slices.Equal(got, slices.Repeat([]string{c.Hostname}, 6)) {
		t.Errorf("srun -N3 -n6 hostname = %q; want %s six times", got, c.Hostname)
	}

	// An allocation's variables are what gorun's host list is read from.
	out = c.Run(t, cmdTimeout, "salloc", "-N3", "-n6", "printenv", "SLURM_JOB_NODELIST", "SLURM_TASKS_PER_NODE")
	lines := strings.Fields(out)
	if !slices.Equal(lines, []string{"n[1-3]", "2(x3)"}) {
		t.Fatalf("salloc -N3 -n6 printenv = %q; want n[1-3] 2(x3)", lines)
	}
	env := map[string]string{hosts.EnvSlurmNodeList: lines[0], hosts.EnvSlurmTasksPerNode: lines[1]}
	hs, ok, err := hosts.FromSlurm(func(k string) string { return env[k] })
	if err != nil || !ok || len(hs) != 3 {
		t.Fatalf("hosts.FromSlurm of the allocation = %v, %v, %v", hs, ok, err)
	}
	for i, h := range hs {
		if h.Name != c.Nodes[i] || h.Slots != CPUs {
			t.Errorf("host %d = %s with %d slots; want %s with %d", i, h.Name, h.Slots, c.Nodes[i], CPUs)
		}
	}

	// A batch job runs its script on the first node, its steps on all.
	script := filepath.Join(c.Dir, "job.sh")
	body := "#!/bin/sh\necho batch on $SLURMD_NODENAME\nsrun printenv SLURMD_NODENAME | sort\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(c.Dir, "job.out")
	c.Run(t, cmdTimeout, "sbatch", "--wait", "-N3", "-n6", "-o", outFile, script)
	got, err := os.ReadFile(outFile)
	want := "batch on n1\nn1\nn1\nn2\nn2\nn3\nn3\n"
	if err != nil || string(got) != want {
		t.Errorf("sbatch --wait output = %q, %v; want %q", got, err, want)
	}

	testTimeout(t, c)
	testClose(t, c)
}

// testTimeout checks that a command past its context's deadline is killed
// with its process group and Wait returns, even though its job's tasks,
// started by slurmstepd, live on until Close.
func testTimeout(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.CommandContext(ctx, "srun", "-N1", "-w", "n3", "sleep", "600").Run()
	if took := time.Since(start); err == nil || took > 10*time.Second {
		t.Errorf("srun sleep 600 with a 500ms context: %v after %v; want killed within 10s", err, took)
	}
}

// testClose leaves a job running and checks that Close ends it and every
// daemon, and removes the rig's files.
func testClose(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	job := c.CommandContext(ctx, "srun", "-N1", "-w", "n2", "sleep", "600")
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer job.Wait()
	var left []int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if left = sleepers(c, "n2"); len(left) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("srun -w n2 sleep 600 did not start a sleep; job processes: %v", c.Pids())
		}
	}
	if pids := c.Pids(); len(pids) < 3 { // srun, slurmstepd, sleep at least
		t.Errorf("Pids() = %v with a job running; want srun, slurmstepd and sleep", pids)
	}
	daemons := c.DaemonPids()
	if len(daemons) != 1+1+len(c.Nodes) {
		t.Errorf("DaemonPids() = %v; want munged, slurmctld and %d slurmds", daemons, len(c.Nodes))
	}

	start := time.Now()
	c.Close()
	c.Close() // idempotent
	t.Logf("Close took %v", time.Since(start).Round(time.Millisecond))
	for _, pid := range append(daemons, left...) {
		if testhost.Alive(pid) {
			t.Errorf("pid %d still alive after Close", pid)
		}
	}
	if pids := matching(c.ownConf); len(pids) > 0 {
		t.Errorf("processes %v of the cluster still alive after Close", pids)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("dir %s still exists after Close: %v", c.Dir, err)
	}
}

// sleepers lists the cluster's processes running sleep on node.
func sleepers(c *Cluster, node string) []int {
	var pids []int
	for _, pid := range c.Pids() {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		env, err2 := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && err2 == nil && strings.TrimSpace(string(comm)) == "sleep" && envValue(env, "SLURMD_NODENAME") == node {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestEnvDropsInheritedSlurm(t *testing.T) {
	t.Setenv("SLURM_JOB_ID", "99")
	t.Setenv("SLURM_CONF", "/elsewhere/slurm.conf")
	t.Setenv("SBATCH_PARTITION", "big")
	c := &Cluster{Conf: "/rig/slurm.conf"}
	var slurm []string
	for _, kv := range c.Env() {
		if strings.HasPrefix(kv, "SLURM_") || strings.HasPrefix(kv, "SBATCH_") {
			slurm = append(slurm, kv)
		}
	}
	if !slices.Equal(slurm, []string{"SLURM_CONF=/rig/slurm.conf"}) {
		t.Errorf("Slurm variables in Env() = %q; want only SLURM_CONF=/rig/slurm.conf", slurm)
	}
}

func sortedLines(s string) []string {
	lines := strings.Fields(s)
	slices.Sort(lines)
	return lines
}
