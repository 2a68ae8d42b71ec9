package launch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/net/shm"
)

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		mnt, root string // "" mnt: none found
	}{
		{"unified", "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", "/"},
		{"hybrid", "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
			"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified", "/"},
		{"a container's view", "612 600 0:26 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n", "/sys/fs/cgroup", "/docker/abc"},
		{"escaped", `40 30 0:37 / /mnt/cg\040two rw - cgroup2 none rw` + "\n", "/mnt/cg two", "/"},
		{"v1 only", "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt, root, err := parseMountinfo(strings.NewReader(tc.in))
			if tc.mnt == "" {
				if err == nil {
					t.Errorf("found %s %s, want an error", mnt, root)
				}
				return
			}
			if err != nil || mnt != tc.mnt || root != tc.root {
				t.Errorf("got %q %q %v, want %q %q", mnt, root, err, tc.mnt, tc.root)
			}
		})
	}
}

func TestUnifiedPath(t *testing.T) {
	p, err := unifiedPath(strings.NewReader("9:name=systemd:/\n4:memory:/x\n0::/user.slice/a.scope\n"))
	if err != nil || p != "/user.slice/a.scope" {
		t.Errorf("got %q %v", p, err)
	}
	if p, err := unifiedPath(strings.NewReader("4:memory:/x\n")); err == nil {
		t.Errorf("v1 only: got %q, want an error", p)
	}
}

// testCgroup makes a job cgroup for the test, or skips it where cgroup v2
// cannot hold one.
func testCgroup(t *testing.T) *cgroup {
	t.Helper()
	c, err := newCgroup(fmt.Sprintf("%stest-%d-%d", guardPrefix, os.Getpid(), time.Now().UnixNano()), nil, t.Logf)
	if err != nil {
		t.Skipf("cgroup v2 cannot hold a job here: %v", err)
	}
	t.Cleanup(func() { killCgroup(c.dir, cgroupWait) })
	return c
}

// startIn starts a shell script in cgroup c (none if nil) and returns it
// with the pid of the daemon it started, which has left its session.
func startIn(t *testing.T, c *cgroup, script string) (*exec.Cmd, int) {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "daemon")
	cmd := exec.Command("sh", "-c", `setsid sh -c 'echo $$ > `+pidfile+`.tmp; mv `+pidfile+`.tmp `+pidfile+`; exec sleep 300' </dev/null >/dev/null 2>&1 &
`+script)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if c != nil {
		c.procAttr(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; ; i++ {
		if b, err := os.ReadFile(pidfile); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			return cmd, pid
		}
		if i > 1000 {
			t.Fatal("the daemon did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cgroupOf is the cgroup v2 path of pid.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := unifiedPath(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// running reports whether pid is a process that has not exited.
func running(pid int) bool {
	s := stateOf(pid)
	return s != 0 && s != 'Z' && s != 'X'
}

// waitGone waits up to 5 s for pid to exit.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; running(pid); i++ {
		if i > 500 {
			t.Fatalf("pid %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCgroupClose: a process started into the job's cgroup is in it, and
// so is the daemon it leaves; Close kills both and removes the cgroup,
// with the cgroup a nested gorun would make below it.
func TestCgroupClose(t *testing.T) {
	c := testCgroup(t)
	cmd, daemon := startIn(t, c, "exec sleep 300")
	rel := "/" + filepath.Base(c.dir)
	for _, pid := range []int{cmd.Process.Pid, daemon} {
		if got := cgroupOf(t, pid); !strings.HasSuffix(got, rel) {
			t.Errorf("pid %d is in cgroup %s, want one ending in %s", pid, got, rel)
		}
	}
	if err := os.Mkdir(filepath.Join(c.dir, guardPrefix+"nested"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, daemon)
	cmd.Wait()
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", c.dir, err)
	}
}

// TestGuard: the guard kills and removes the cgroup once its input ends,
// and the job's files in /dev/shm, and refuses a directory that is not a
// job's cgroup.
func TestGuard(t *testing.T) {
	c := testCgroup(t)
	_, daemon := startIn(t, c, "exec sleep 300")
	job, ok := cgroupJob(c.dir)
	if !ok {
		t.Fatalf("no job in the name of %s", c.dir)
	}
	seg := filepath.Join(shm.Dir, "gorun-"+job+"-r0-0123456789abcdef")
	other := filepath.Join(shm.Dir, "gorun-"+job+"x-r0-0123456789abcdef") // another job's
	for _, f := range []string{seg, seg + ".bell", other} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Skipf("no %s to leave a segment in: %v", shm.Dir, err)
		}
		t.Cleanup(func() { os.Remove(f) })
	}
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- guardCgroup(c.dir, r, io.Discard) }()
	select {
	case code := <-done:
		t.Fatalf("the guard returned %d before its input ended", code)
	case <-time.After(50 * time.Millisecond):
	}
	w.Close()
	if code := <-done; code != 0 {
		t.Fatalf("guard: %d", code)
	}
	if running(daemon) {
		t.Errorf("the daemon %d outlived the guard", daemon)
	}
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", c.dir, err)
	}
	for _, f := range []string{seg, seg + ".bell"} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("the job's %s is still there: %v", f, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another job's %s: %v", other, err)
	}
	if code := guardCgroup("/sys/fs/cgroup/user.slice", strings.NewReader(""), io.Discard); code != 2 {
		t.Errorf("guarding a cgroup not a job's: %d, want 2", code)
	}
}

// TestCgroupStartFails: a rank that cannot be cloned into the job's
// cgroup (here one of type "domain invalid", the child of a threaded
// cgroup, which takes no processes) starts outside it, and so do the
// ranks after it, with one line.
func TestCgroupStartFails(t *testing.T) {
	c := testCgroup(t)
	c.Close()
	dir := c.dir
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killCgroup(dir, cgroupWait) })
	threaded := filepath.Join(dir, "threaded")
	if err := os.Mkdir(threaded, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(threaded, "cgroup.type"), []byte("threaded"), 0); err != nil {
		t.Skipf("cannot make a threaded cgroup: %v", err)
	}
	invalid := filepath.Join(threaded, "invalid") // a domain below a threaded cgroup
	if err := os.Mkdir(invalid, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(invalid)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	var said []string
	bad := &cgroup{dir: invalid, fd: fd, logf: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	for rank := range 2 {
		p, err := local{}.Start(&spec{Rank: rankPlan{Rank: rank}, Path: "/bin/sh", Args: []string{"-c", "cat /proc/self/cgroup"},
			Stdout: nopCloser{&bytes.Buffer{}}, Stderr: nopCloser{&bytes.Buffer{}}, Cgroup: bad})
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
		if st := p.Wait(); !st.Success() {
			t.Errorf("rank %d %v", rank, st)
		}
	}
	if bad.on() || len(said) != 1 || !strings.Contains(said[0], "starting them outside it") {
		t.Errorf("on %v, said %q; want off, and one line", bad.on(), said)
	}
}
