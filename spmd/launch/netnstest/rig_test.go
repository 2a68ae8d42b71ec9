package netnstest

import (
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

var rigNet = netip.MustParsePrefix("198.18.0.0/15")

func TestRig(t *testing.T) {
	r := New(t, 3)

	seen := map[string]bool{}
	for _, h := range r.Hosts {
		addr := netip.MustParseAddr(h.Addr)
		if !rigNet.Contains(addr) || seen[h.Addr] || h.Addr == r.BridgeAddr {
			t.Errorf("host %s has address %s; want a distinct one in %s", h.Name, h.Addr, rigNet)
		}
		seen[h.Addr] = true
		out, err := r.SSHCommand(h.Name, "hostname").Output() // stdout only: root's shell rc may write to stderr
		if got := strings.TrimSpace(string(out)); err != nil || got != h.Name {
			t.Errorf("ssh %s hostname = %q, %v; want %q", h.Name, got, err, h.Name)
		}
	}

	// Plain ssh with the rig's arguments works too, and so does the hostfile.
	out, err := exec.Command("ssh", append(r.SSHArgs(), "h2", "echo", "ok")...).Output()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("ssh -F h2 echo ok = %q, %v", out, err)
	}
	hf, err := os.ReadFile(r.Hostfile)
	if err != nil || !strings.HasPrefix(string(hf), "h1 slots=2\nh2 slots=2\n") {
		t.Errorf("hostfile = %q, %v", hf, err)
	}

	// Host to host, across the bridge.
	if got := strings.TrimSpace(r.Run(t, "h1", "ssh", "-F", r.SSHConfig, "h3", "hostname")); got != "h3" {
		t.Errorf("from h1, ssh h3 hostname = %q", got)
	}

	var leftover int
	t.Run("Pids", func(t *testing.T) { leftover = testPids(t, r) })
	t.Run("KillLink", func(t *testing.T) { testKillLink(t, r) })

	var pids []int
	for _, h := range r.Hosts {
		pids = append(pids, r.SSHDPid(h.Name))
	}
	r.Close()
	r.Close() // idempotent
	for _, pid := range pids {
		if pid == 0 || testhost.Alive(pid) {
			t.Errorf("sshd pid %d still alive after Close", pid)
		}
	}
	list, _ := exec.Command("ip", "netns", "list").Output()
	for _, h := range r.Hosts {
		if strings.Contains(string(list), h.Netns) {
			t.Errorf("namespace %s still exists after Close", h.Netns)
		}
		if linkExists(h.Link) {
			t.Errorf("link %s still exists after Close", h.Link)
		}
	}
	if leftover != 0 && testhost.Alive(leftover) {
		t.Errorf("process %d left on h2 survived Close", leftover)
	}
	if linkExists(r.Bridge) {
		t.Errorf("bridge %s still exists after Close", r.Bridge)
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Errorf("dir %s still exists after Close: %v", r.Dir, err)
	}
}

// testPids leaves a process behind on h2, finds it with Pids and returns
// its pid, for the caller to check that Close kills it.
func testPids(t *testing.T, r *Rig) int {
	if pids, err := r.Pids("h2"); err != nil || len(pids) != 0 {
		t.Fatalf("Pids(h2) before = %v, %v; want none", pids, err)
		return 0
	}
	out, err := r.SSHCommand("h2", "sleep 300 </dev/null >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		t.Fatalf("starting sleep on h2: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("ssh echo $! = %q", out)
	}
	if !waitFor(func() bool { p, _ := r.Pids("h2"); return contains(p, pid) }) {
		p, err := r.Pids("h2")
		t.Fatalf("Pids(h2) = %v, %v; want it to contain the sleep %d", p, err, pid)
	}
	if p, _ := r.Pids("h1"); contains(p, pid) {
		t.Errorf("Pids(h1) = %v contains h2's sleep %d", p, pid)
	}
	return pid
}

// testKillLink makes h3 unreachable and brings it back.
func testKillLink(t *testing.T, r *Rig) {
	if err := r.KillLink("h3"); err != nil {
		t.Fatal(err)
	}
	err := exec.Command("ssh", append(r.SSHArgs(), "-o", "ConnectTimeout=1", "h3", "true")...).Run()
	if err == nil {
		t.Errorf("ssh h3 succeeded with its link down")
	}
	if err := r.RestoreLink("h3"); err != nil {
		t.Fatal(err)
	}
	ok := waitFor(func() bool { return r.SSHCommand("h3", "true").Run() == nil })
	if !ok {
		t.Errorf("ssh h3 fails after RestoreLink")
	}
	if err := r.KillLink("h9"); err == nil {
		t.Errorf("KillLink(h9) on a 3-host rig: no error")
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// waitFor polls cond for a bounded time.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

func BenchmarkNew(b *testing.B) {
	for _, n := range []int{3, 4} {
		b.Run(strconv.Itoa(n)+"hosts", func(b *testing.B) {
			for range b.N {
				New(b, n).Close()
			}
		})
	}
}
