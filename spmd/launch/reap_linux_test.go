package launch

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestOwnChildren: the children files of this process's threads list the
// children it started, as the scan of every process does.
func TestOwnChildren(t *testing.T) {
	var pids []int
	for range 3 {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Skipf("no sleep to start: %v", err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		pids = append(pids, cmd.Process.Pid)
	}
	own, all := ownChildren(), children(os.Getpid())
	for _, pid := range pids {
		if !slices.Contains(own, pid) {
			t.Errorf("ownChildren() = %v, without child %d", own, pid)
		}
		if !slices.Contains(all, pid) {
			t.Errorf("children() = %v, without child %d", all, pid)
		}
	}
}
