package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
)

// testRigAgentKilled: a SIGKILL of h2's agent leaves none of its ranks'
// daemons on h2 where cgroup v2 can hold them: the agent's guard kills
// them and removes the cgroup. The job ends with 255, the host lost.
func testRigAgentKilled(t *testing.T, rig *netnstest.Rig) {
	self := usableCgroup(t)
	pidfile := filepath.Join(t.TempDir(), "pids")
	script := `setsid sh -c 'exec sleep 300' </dev/null >/dev/null 2>&1 & echo "$GORUN_RANK $!" >> ` + pidfile + `; exec sleep 300`
	cmd := gorunCmd(t, append(rigArgs(rig), "-H", "h2:2", "-np", "2", "--kill-grace", "1s", "sh", "-c", script)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	flat := waitPids(t, pidfile, 4)
	agent := agentOn(t, rig, "h2")
	syscall.Kill(agent, syscall.SIGKILL)
	if code := exitCodeOf(cmd.Wait()); code != 255 {
		t.Errorf("gorun exited %d, want 255 for the lost host\n%s", code, stderr.String())
	}
	for i := 1; i < len(flat); i += 2 {
		for j := 0; alive(flat[i]) && j < 500; j++ {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(flat[i]) {
			t.Errorf("rank %d's daemon %d outlived its agent's SIGKILL by 5s", flat[i-1], flat[i])
		}
	}
	// The rig's hosts share this machine's cgroups.
	cgroups := filepath.Join(self, fmt.Sprintf("gorun-*-%d", agent))
	for i := 0; ; i++ {
		left, _ := filepath.Glob(cgroups)
		if len(left) == 0 {
			break
		}
		if i > 500 {
			t.Errorf("the agent's cgroup is left: %v", left)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkNoLeftovers(t, rig)
}

// agentOn finds the pid of the agent on host.
func agentOn(t *testing.T, rig *netnstest.Rig, host string) int {
	t.Helper()
	pids, err := rig.Pids(host)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if args := strings.Split(string(b), "\x00"); len(args) > 1 && filepath.Base(args[0]) == "gorun" && args[1] == "--agent" {
			return p
		}
	}
	t.Fatalf("no agent on %s among %s", host, psList(pids))
	return 0
}
