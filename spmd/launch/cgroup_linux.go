package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/net/shm"
)

// A job's cgroup holds the ranks that one starter (gorun, or a host's
// agent) starts, and every process they leave behind, in a cgroup v2 of
// their own below the starter's: gorun-JOBID-PID. Each rank is cloned
// straight into it (CLONE_INTO_CGROUP), so none runs a moment outside.
// When the job is over, after the ranks' SIGTERM, grace and SIGKILL, the
// starter writes 1 to its cgroup.kill (Linux 5.14), which SIGKILLs every
// process in it however it detached, waits for cgroup.events to say
// "populated 0" and removes it. A guard process (RunGuard), which the
// starter starts in a session of its own outside the cgroup, does the
// same once the pipe that only the starter writes reaches its end: so a
// SIGKILL of gorun or of an agent still ends the job's processes.
//
// Where cgroup v2 is not mounted, not writable, has no cgroup.kill, or
// would not take processes in a child of the starter's cgroup, there is
// no cgroup and the starter's subreaping (Subreap, KillOrphans) holds the
// ranks, as before.

// cgroupWait bounds the wait for a killed cgroup to empty.
const cgroupWait = 5 * time.Second

// cgroup is a job's cgroup on this host. Its methods are safe for
// concurrent use; Close is called once, when every rank has ended.
type cgroup struct {
	dir   string
	fd    *os.File    // the directory, for CLONE_INTO_CGROUP
	off   atomic.Bool // a start into it failed: the later ranks start outside
	logf  func(format string, args ...any)
	guard *exec.Cmd // nil: no guard
	pipe  *os.File  // the write end of the guard's stdin; only this process holds it
}

// newCgroup makes the cgroup called name below this process's own and
// starts its guard with the command guard (the cgroup's directory
// appended). It returns an error saying why when cgroup v2 cannot hold
// the job here; the caller then starts ranks as before. logf gets a line
// when the guard cannot be started (the cgroup is used all the same).
func newCgroup(name string, guard []string, logf func(string, ...any)) (*cgroup, error) {
	parent, err := selfCgroup()
	if err != nil {
		return nil, err
	}
	// Moving a process into a cgroup (which CLONE_INTO_CGROUP does) takes
	// write access to cgroup.procs of the cgroup both are below.
	if err := unix.Access(filepath.Join(parent, "cgroup.procs"), unix.W_OK); err != nil {
		return nil, fmt.Errorf("%s/cgroup.procs: %w", parent, err)
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	fail := func(err error) (*cgroup, error) {
		os.Remove(dir)
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		return fail(fmt.Errorf("%s has no cgroup.kill (Linux 5.14 or later has)", dir))
	}
	// Only a domain takes processes: a child of a threaded cgroup is
	// "domain invalid". (The starter's own cgroup holds the starter, so
	// unless it is the root it enables no controller for its children,
	// and the "no internal processes" rule does not stop this child.)
	if typ, err := os.ReadFile(filepath.Join(dir, "cgroup.type")); err != nil || strings.TrimSpace(string(typ)) != "domain" {
		return fail(fmt.Errorf("%s is of type %q, not a domain that takes processes", dir, strings.TrimSpace(string(typ))))
	}
	fd, err := os.Open(dir)
	if err != nil {
		return fail(err)
	}
	c := &cgroup{dir: dir, fd: fd, logf: logf}
	if len(guard) > 0 {
		if err := c.startGuard(guard); err != nil {
			logf("cannot start the guard of cgroup %s (%v): a SIGKILL of this process would leave the job's processes running", dir, err)
		}
	}
	return c, nil
}

// startGuard starts the guard: in a session of its own, so that the
// terminal's signals do not reach it, and in this process's cgroup, not
// the job's.
func (c *cgroup) startGuard(guard []string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(guard[0], append(guard[1:], c.dir)...)
	cmd.Stdin = r // stdout and stderr: /dev/null, holding none of gorun's pipes
	cmd.Dir = "/" // pinning no directory of the job's
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return err
	}
	c.guard, c.pipe = cmd, w
	return nil
}

// on reports whether ranks start in the cgroup: there is one, and no
// start into it failed.
func (c *cgroup) on() bool { return c != nil && !c.off.Load() }

// procAttr sets attr to start a process into the cgroup.
func (c *cgroup) procAttr(attr *syscall.SysProcAttr) {
	attr.UseCgroupFD, attr.CgroupFD = true, int(c.fd.Fd())
}

// failed turns the cgroup off for the ranks still to start: a rank could
// not be started into it (err), but could outside it.
func (c *cgroup) failed(err error) {
	if !c.off.Swap(true) {
		c.logf("cannot start ranks in cgroup %s (%v); starting them outside it", c.dir, err)
	}
}

// Close kills what is left in the cgroup, waits for it to empty, removes
// it, and lets its guard go. It is for when every rank has ended.
func (c *cgroup) Close() error {
	if c == nil {
		return nil
	}
	err := killCgroup(c.dir, cgroupWait)
	c.fd.Close()
	if c.guard != nil {
		c.pipe.Close()
		if err == nil {
			// Nothing is left to guard, and waiting for a guard still
			// starting up would slow every short job.
			c.guard.Process.Kill()
		}
		done := make(chan struct{})
		go func() { c.guard.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second): // it is trying again: no longer, as this process goes
			c.guard.Process.Kill()
			<-done
		}
	}
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", c.dir, err)
	}
	c.logf("removed cgroup %s", c.dir)
	return nil
}

// killCgroup SIGKILLs every process in the cgroup dir and its
// descendants, waits up to wait for them to be gone, and removes the
// cgroups, the deepest first (a gorun run by a rank has one below). A
// cgroup already gone is not an error.
func killCgroup(dir string, wait time.Duration) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; populated(dir); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still there %v after cgroup.kill", wait)
		}
		time.Sleep(pause)
	}
	var dirs []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var err error
	for i := len(dirs) - 1; i >= 0; i-- {
		if e := os.Remove(dirs[i]); e != nil && !errors.Is(e, fs.ErrNotExist) && err == nil {
			err = e
		}
	}
	return err
}

// populated reads cgroup.events: whether a process is in the cgroup or
// below it. Zombies are not. A cgroup that is gone is not populated.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "populated "); ok {
			return v != "0"
		}
	}
	return false
}

// RunGuard is gorun's hidden guard mode (gorun --cgroup-guard DIR): it
// reads in until its end, which comes when the gorun or agent that
// started it has ended, however it ended; then it kills what is left in
// the job's cgroup dir, waits for it to empty and removes it, and removes
// what the job's ranks left in /dev/shm (shm.Cleanup), which the gorun or
// agent does at the end of a job but not when it is killed. It ignores
// the signals that stop a job (the job's starter decides when), and
// refuses a directory that is not a job's cgroup. It returns the exit
// status; log gets the reason of a failure.
func RunGuard(dir string, in io.Reader, log io.Writer) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	return guardCgroup(dir, in, log)
}

// guardCgroup is RunGuard but for the signals.
func guardCgroup(dir string, in io.Reader, log io.Writer) int {
	if !strings.HasPrefix(filepath.Base(dir), guardPrefix) || !filepath.IsAbs(dir) {
		fmt.Fprintf(log, "gorun: --cgroup-guard %s: not the absolute path of a job's cgroup (%s...)\n", dir, guardPrefix)
		return 2
	}
	io.Copy(io.Discard, in)
	if err := killCgroup(dir, cgroupWait); err != nil {
		fmt.Fprintf(log, "gorun: cgroup %s: %v\n", dir, err)
		return 1
	}
	// The ranks are gone: their segments can go. A gorun that died of a
	// SIGPIPE (gorun ... | head) left 250 MB of a 16-rank job's there.
	if job, ok := cgroupJob(dir); ok {
		if err := shm.Cleanup(job); err != nil {
			fmt.Fprintf(log, "gorun: %v\n", err)
			return 1
		}
	}
	return 0
}

// cgroupJob is the id of the job whose cgroup is dir (gorun-JOBID-PID,
// openCgroup's name).
func cgroupJob(dir string) (string, bool) {
	rest, ok := strings.CutPrefix(filepath.Base(dir), guardPrefix)
	i := strings.LastIndexByte(rest, '-')
	if !ok || i <= 0 {
		return "", false
	}
	return rest[:i], true
}

// selfCgroup is the directory of this process's cgroup v2.
func selfCgroup() (string, error) {
	mnt, root, err := cgroup2Mount("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	path, err := unifiedPath(f)
	if err != nil {
		return "", err
	}
	rel, ok := strings.CutPrefix(path, root)
	if !ok || (rel != "" && root != "/" && !strings.HasPrefix(rel, "/")) {
		return "", fmt.Errorf("cgroup %s is outside the cgroup2 mount at %s (of %s)", path, mnt, root)
	}
	return filepath.Join(mnt, rel), nil
}

// unifiedPath reads the cgroup v2 path ("0::/a/b") of a /proc/PID/cgroup.
func unifiedPath(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

// cgroup2Mount finds the first cgroup2 mount in a mountinfo file: where it
// is mounted, and which cgroup of the hierarchy it shows at that place.
func cgroup2Mount(mountinfo string) (mnt, root string, err error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	return parseMountinfo(f)
}

func parseMountinfo(r io.Reader) (mnt, root string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// 40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		return unescapeMount(f[4]), unescapeMount(f[3]), nil
	}
	return "", "", errors.New("cgroup2 is not mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
