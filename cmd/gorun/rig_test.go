package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
)

// Multi-host tests: gorun across the network-namespace hosts of a
// netnstest rig, each with its own sshd. They need root and skip otherwise.
// One rig serves all the subtests of a test.

// rigArgs are the flags that make gorun reach the rig's hosts.
func rigArgs(r *netnstest.Rig) []string {
	return []string{"--ssh-args", "-F " + r.SSHConfig}
}

// buildHello builds examples/hello once per test binary.
var helloOnce struct {
	sync.Once
	path string
	err  error
}

func helloBin(t *testing.T) string {
	helloOnce.Do(func() {
		helloOnce.path = filepath.Join(filepath.Dir(gorunBin), "hello")
		out, err := exec.Command("go", "build", "-o", helloOnce.path, "../../examples/hello").CombinedOutput()
		if err != nil {
			helloOnce.err = fmt.Errorf("building hello: %v\n%s", err, out)
		}
	})
	if helloOnce.err != nil {
		t.Fatal(helloOnce.err)
	}
	return helloOnce.path
}

var helloLine = regexp.MustCompile(`^rank (\d+) of (\d+) on (\S+) \(local rank (\d+)\)$`)

// helloHosts runs hello with args and returns the host of each rank.
func helloHosts(t *testing.T, np int, args ...string) []string {
	t.Helper()
	r := gorun(t, "", append(args, "-np", fmt.Sprint(np), helloBin(t))...)
	if r.code != 0 {
		t.Fatal(r)
	}
	got := make([]string, np)
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		m := helloLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected line %q\n%s", l, r)
		}
		var rank int
		fmt.Sscan(m[1], &rank)
		if m[2] != fmt.Sprint(np) || rank >= np || got[rank] != "" {
			t.Fatalf("bad or repeated line %q\n%s", l, r)
		}
		got[rank] = m[3]
	}
	for i, h := range got {
		if h == "" {
			t.Fatalf("rank %d did not report\n%s", i, r)
		}
	}
	return got
}

func TestRigHello(t *testing.T) {
	rig := netnstest.New(t, 3)
	base := append(rigArgs(rig), "--hostfile", rig.Hostfile)
	t.Run("by slot", func(t *testing.T) {
		got := helloHosts(t, 6, base...)
		want := []string{"h1", "h1", "h2", "h2", "h3", "h3"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ranks ran on %v, want %v", got, want)
		}
	})
	t.Run("by node", func(t *testing.T) {
		got := helloHosts(t, 6, append(base, "--map-by", "node")...)
		want := []string{"h1", "h2", "h3", "h1", "h2", "h3"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ranks ran on %v, want %v", got, want)
		}
	})
	t.Run("-H", func(t *testing.T) {
		got := helloHosts(t, 3, append(rigArgs(rig), "-H", "h3:1,h1:2")...)
		want := []string{"h3", "h1", "h1"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ranks ran on %v, want %v", got, want)
		}
	})
	checkNoLeftovers(t, rig)
}

// checkNoLeftovers waits until no process runs on any rig host.
func checkNoLeftovers(t *testing.T, rig *netnstest.Rig) {
	t.Helper()
	for _, h := range rig.Hosts {
		var pids []int
		for i := 0; i < 200; i++ {
			pids, _ = rig.Pids(h.Name)
			if len(pids) == 0 {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if len(pids) > 0 {
			t.Errorf("host %s: processes left: %s", h.Name, psList(pids))
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}
}

func psList(pids []int) string {
	var out []string
	for _, p := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		out = append(out, fmt.Sprintf("%d %s", p, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
