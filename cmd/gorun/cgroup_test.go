package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Where cgroup v2 can hold a job, each job's ranks on a host run in a
// cgroup of their own, which gorun (or the host's agent) kills and removes
// at the end, and its guard when gorun is SIGKILLed. Elsewhere these tests
// skip with one line: TestDaemonsDie covers the subreaping that holds the
// ranks there.

// usableCgroup returns the directory of this process's cgroup v2, which
// gorun's job cgroups go below, or skips t when cgroup v2 cannot hold a
// job here (not mounted, read-only, no cgroup.kill, not a domain).
func usableCgroup(t *testing.T) string {
	t.Helper()
	self, err := selfCgroupDir()
	if err != nil {
		t.Skipf("no cgroup v2 here (%v): gorun holds ranks as their subreaper only", err)
	}
	probe := filepath.Join(self, fmt.Sprintf("gorun-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("cgroup v2 not writable here (%v): gorun holds ranks as their subreaper only", err)
	}
	defer os.Remove(probe)
	typ, _ := os.ReadFile(filepath.Join(probe, "cgroup.type"))
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil || strings.TrimSpace(string(typ)) != "domain" {
		t.Skipf("cgroup v2 cannot hold a job here (cgroup.kill: %v, type %q)", err, typ)
	}
	return self
}

// selfCgroupDir finds this process's cgroup v2 directory from
// /proc/self/mountinfo and /proc/self/cgroup.
func selfCgroupDir() (string, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var mnt string
	for _, l := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		if f := strings.Fields(pre); ok && strings.HasPrefix(post, "cgroup2 ") && len(f) >= 5 && f[3] == "/" {
			mnt = f[4]
			break
		}
	}
	if mnt == "" {
		return "", fmt.Errorf("cgroup2 is not mounted")
	}
	path, err := cgroupPath(os.Getpid())
	if err != nil {
		return "", err
	}
	return filepath.Join(mnt, path), nil
}

// cgroupPath is pid's cgroup v2 path, from /proc/PID/cgroup.
func cgroupPath(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("pid %d has no cgroup v2", pid)
}

// waitGone waits up to 5 s until path does not exist.
func waitGone(t *testing.T, path string) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		if i > 500 {
			t.Fatalf("%s still exists after 5s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCgroupHoldsRanks: while a job runs, its ranks (and a daemon one
// leaves) are in one cgroup, gorun-JOBID-PID below gorun's own; gorun
// removes it when the job ends, well or badly.
func TestCgroupHoldsRanks(t *testing.T) {
	self := usableCgroup(t)
	for _, tc := range []struct {
		name string
		code int // rank 1's exit status; the job's
	}{{"normal end", 0}, {"failed rank", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pids, proceed := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
			script := `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo "$GORUN_RANK $$ $!" >> ` + pids + `
while [ ! -e ` + proceed + ` ]; do sleep 0.02; done
[ "$GORUN_RANK" = 1 ] && exit ` + strconv.Itoa(tc.code) + `
[ "$GORUN_RANK" = 0 ] && [ ` + strconv.Itoa(tc.code) + ` != 0 ] && exec sleep 300
exit 0`
			cmd := gorunCmd(t, "-np", "2", "--kill-grace", "1s", "sh", "-c", script)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			flat := waitPids(t, pids, 6)
			var cg string
			for i := 0; i+2 < len(flat); i += 3 {
				for _, pid := range flat[i+1 : i+3] {
					got, err := cgroupPath(pid)
					if err != nil {
						t.Fatal(err)
					}
					if cg == "" {
						cg = got
					}
					if got != cg {
						t.Errorf("rank %d's pid %d in cgroup %s, another in %s", flat[i], pid, got, cg)
					}
				}
			}
			own, err := cgroupPath(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			want := regexp.MustCompile(`^gorun-[0-9a-f]+-` + strconv.Itoa(cmd.Process.Pid) + `$`)
			if filepath.Dir(cg) != own || !want.MatchString(filepath.Base(cg)) {
				t.Errorf("ranks in cgroup %s, want gorun-JOBID-%d below %s", cg, cmd.Process.Pid, own)
			}
			cgDir := filepath.Join(self, filepath.Base(cg))
			t.Cleanup(func() { removeCgroup(t, cgDir) })
			if !isDir(cgDir) {
				t.Errorf("%s is not there while the job runs", cgDir)
			}
			os.WriteFile(proceed, nil, 0o644)
			if code := exitCodeOf(cmd.Wait()); code != tc.code {
				t.Errorf("gorun exited %d, want %d\n%s", code, tc.code, stderr.String())
			}
			if isDir(cgDir) {
				t.Errorf("%s is left after the job", cgDir)
			}
			for i := 2; i < len(flat); i += 3 {
				if alive(flat[i]) {
					t.Errorf("rank %d's daemon %d outlived the job", flat[i-2], flat[i])
					syscall.Kill(flat[i], syscall.SIGKILL)
				}
			}
		})
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// TestCgroupGorunKilled: a SIGKILL of gorun leaves no process of the job:
// the kernel kills the ranks, and the guard the daemons they left (which
// subreaping alone cannot reach), then removes the job's cgroup and exits.
func TestCgroupGorunKilled(t *testing.T) {
	self := usableCgroup(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	script := `setsid sh -c 'exec sleep 300' </dev/null >/dev/null 2>&1 & echo "$GORUN_RANK $!" >> ` + pids + `; exec sleep 300`
	cmd := gorunCmd(t, "-np", "2", "sh", "-c", script)
	cmd.WaitDelay = 10 * time.Second // should a daemon hold gorun's output
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	flat := waitPids(t, pids, 4)
	var cgDir string
	if cg, err := cgroupPath(flat[1]); err == nil && cg != "/" {
		cgDir = filepath.Join(self, filepath.Base(cg))
		t.Cleanup(func() { removeCgroup(t, cgDir) })
	}
	cmd.Process.Kill()
	cmd.Wait()
	for i := 1; i < len(flat); i += 2 {
		for j := 0; alive(flat[i]) && j < 500; j++ {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(flat[i]) {
			t.Errorf("rank %d's daemon %d outlived gorun's SIGKILL by 5s\n%s", flat[i-1], flat[i], stderr.String())
			syscall.Kill(flat[i], syscall.SIGKILL)
		}
	}
	if cgDir == "" || !strings.HasPrefix(filepath.Base(cgDir), "gorun-") {
		t.Fatalf("the ranks ran in no job cgroup (%q)", cgDir)
	}
	waitGone(t, cgDir)
	for i := 0; ; i++ {
		guard := guardsOf(cgDir)
		if len(guard) == 0 {
			break
		}
		if i > 500 {
			t.Fatalf("the guard of %s still runs: pids %v", cgDir, guard)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// guardsOf lists the processes that guard the cgroup dir.
func guardsOf(dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(b), "--cgroup-guard\x00"+dir) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestCgroupFallback: where cgroup v2 cannot hold the job (mounted
// read-only; gorun in a threaded cgroup, whose children take no
// processes) the job runs as before, the ranks held as gorun's
// descendants, and --verbose says why in one line.
func TestCgroupFallback(t *testing.T) {
	self := usableCgroup(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) to make a read-only cgroup mount")
	}
	mnt := self
	for path, _ := cgroupPath(os.Getpid()); path != "/" && path != ""; path = filepath.Dir(path) {
		mnt = filepath.Dir(mnt)
	}
	threaded := filepath.Join(self, fmt.Sprintf("gorun-test-%d", os.Getpid()))
	if err := os.MkdirAll(filepath.Join(threaded, "t"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer removeCgroup(t, threaded)
	if err := os.WriteFile(filepath.Join(threaded, "t", "cgroup.type"), []byte("threaded"), 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, wrap, why string
	}{
		{"read-only", unshare + ` -m sh -c 'mount -o remount,bind,ro ` + mnt + ` && exec "$0" "$@"'`, "read-only file system"},
		{"threaded", `sh -c 'echo $$ > ` + filepath.Join(threaded, "t", "cgroup.procs") + ` && exec "$0" "$@"'`, `of type "domain invalid"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidfile := filepath.Join(dir, "pid")
			rank := `setsid sh -c 'echo $$ > ` + pidfile + `.tmp; mv ` + pidfile + `.tmp ` + pidfile + `; exec sleep 300' </dev/null >/dev/null 2>&1 &
while [ ! -s ` + pidfile + ` ]; do sleep 0.02; done`
			cmd := gorunCmd(t)
			cmd.Path = "/bin/sh"
			cmd.Args = []string{"sh", "-c", tc.wrap + ` "$@"`, "sh", gorunBin, "--verbose", "-np", "1", "sh", "-c", rank}
			r := runGorun(t, cmd)
			if r.code != 0 || !strings.Contains(r.stderr, "no cgroup for the ranks on") || !strings.Contains(r.stderr, tc.why) {
				t.Fatalf("want success and a line saying there is no cgroup (%s)\n%v", tc.why, r)
			}
			b, _ := os.ReadFile(pidfile)
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; alive(pid) && i < 100; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			if alive(pid) {
				t.Errorf("the daemon %d outlived gorun, its subreaper", pid)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}

// removeCgroup kills what is in the cgroup dir, waits for it to empty and
// removes it and the cgroups below it: a test's own, or a job's that gorun
// failed to remove. It touches no cgroup but those, named gorun-*.
func removeCgroup(t *testing.T, dir string) {
	if !strings.HasPrefix(filepath.Base(dir), "gorun-") || !isDir(dir) {
		return
	}
	os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	for i := 0; i < 500; i++ {
		if b, _ := os.ReadFile(filepath.Join(dir, "cgroup.events")); !strings.Contains(string(b), "populated 1") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var dirs []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil {
			t.Errorf("removing cgroup: %v", err)
		}
	}
}
