package slurmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// TestSweep plays a test binary that died with its rig running: a temp dir
// named after a dead pid, and a process whose SLURM_CONF points into it.
// The sweep kills the process and removes the dir, and leaves a live
// rig's alone.
func TestSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("slurmtest: the sweep test plays a root rig's leftovers; needs root")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := mkdir(t, fmt.Sprintf("%s%d-1-", dirPrefix, dead.Process.Pid))
	live := mkdir(t, fmt.Sprintf("%s%d-99-", dirPrefix, os.Getpid()))
	staleSleep := startSleep(t, filepath.Join(stale, "slurm.conf"))
	liveSleep := startSleep(t, filepath.Join(live, "slurm.conf"))

	sweep()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale dir %s still exists after sweep: %v", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live rig's dir %s removed by sweep: %v", live, err)
	}
	staleSleep.Wait()
	if !testhost.Alive(liveSleep.Process.Pid) {
		t.Errorf("live rig's process %d killed by sweep", liveSleep.Process.Pid)
	}
	if staleSleep.ProcessState == nil || staleSleep.ProcessState.Success() {
		t.Errorf("stale rig's process ended with %v; want killed", staleSleep.ProcessState)
	}
}

func mkdir(t *testing.T, pattern string) string {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startSleep starts a sleep with SLURM_CONF=conf, killed at the test's end.
func startSleep(t *testing.T, conf string) *exec.Cmd {
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ppid(cmd.Process.Pid) < 0 || !hasConf(cmd.Process.Pid, conf); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep %d never showed SLURM_CONF=%s", cmd.Process.Pid, conf)
		}
	}
	return cmd
}

func hasConf(pid int, conf string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && envValue(env, "SLURM_CONF") == conf
}
