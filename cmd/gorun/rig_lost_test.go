package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
)

// Hosts lost while the job runs: an agent killed or frozen, a host cut
// off from the others. gorun must exit, and name the host.

// waitExit waits for gorun to exit and returns its status; one that is
// still running after a minute hangs, and is killed.
func waitExit(t *testing.T, cmd *exec.Cmd, stderr *syncBuffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return exitCodeOf(err)
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		cmd.Process.Kill()
		<-done
		t.Fatalf("gorun did not exit:\n%s", stderr.String())
		return 0
	}
}

// testRigTreeLost kills the agent on h1, through which the spawn tree
// (radix 1) reached h2 and, through h2's, h3: the line names h1, the host
// whose connection dropped, with the hosts lost with it. It named
// whichever host's rank the supervisor heard of first.
func testRigTreeLost(t *testing.T, rig *netnstest.Rig) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	cmd := gorunCmd(t, append(rigArgs(rig), "-H", "h1:1,h2:2,h3:2", "--spawn-radix", "1", "-np", "5", "--kill-grace", "1s",
		"sh", "-c", rankScript(pidfile))...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitPids(t, pidfile, 10)
	syscall.Kill(agentOn(t, rig, "h1"), syscall.SIGKILL)
	if code := waitExit(t, cmd, &stderr); code != 255 {
		t.Errorf("gorun exited %d, want 255 for the lost host\n%s", code, stderr.String())
	}
	named := regexp.MustCompile(`(?m)^gorun: host (h\d):.*$`).FindAllStringSubmatch(stderr.String(), -1)
	if len(named) != 1 || named[0][1] != "h1" || !strings.Contains(named[0][0], "connection to its agent lost (") ||
		!strings.HasSuffix(named[0][0], "; hosts h2, h3, reached through its agent, are lost with it; stopping the job") {
		t.Errorf("want one line naming h1 and the hosts lost with it:\n%s", stderr.String())
	}
	checkNoLeftovers(t, rig)
}
