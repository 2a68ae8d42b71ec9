package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Build builds p.Package once with "go build" into a new build directory
// (newBuildDir), sets p.Path, and returns a function that removes the
// directory. A program that is already an executable is returned as is.
// The compiler's output is part of the error, which wraps ErrBuild.
//
// The build runs in a process group of its own, which ctx's end kills
// whole, and so does the death of gorun, however it dies (buildCommand).
// The go command's work directory (GOTMPDIR, unless the environment sets
// one) is inside the build directory, so that what a killed go command
// leaves goes with it.
func (p *program) Build(ctx context.Context) (cleanup func(), err error) {
	if p.Path != "" {
		return func() {}, nil
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, errorf(ErrBuild, "%s is a Go package but there is no go command on PATH to build it", p.Package)
	}
	sweepBuildDirs(os.TempDir())
	dir, lock, err := newBuildDir(os.TempDir())
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", p.Package, err)
	}
	cleanup = func() {
		os.RemoveAll(dir)
		lock.Close() // after: a sweep that takes the lock finds nothing
	}
	out := filepath.Join(dir, filepath.Base(p.Package))
	args := []string{"build", "-o", out}
	if len(p.Files) > 0 {
		args = append(args, p.Files...)
	} else {
		args = append(args, ".")
	}
	cmd := buildCommand(ctx, gobin, args)
	cmd.Dir = p.Package
	if os.Getenv("GOTMPDIR") == "" {
		cmd.Env = append(os.Environ(), "GOTMPDIR="+dir)
	}
	var msg bytes.Buffer
	cmd.Stdout, cmd.Stderr = &msg, &msg
	if err := runBuild(cmd); err != nil {
		cleanup()
		text := strings.TrimRight(msg.String(), "\n")
		if text == "" {
			text = err.Error()
		}
		return nil, errorf(ErrBuild, "go build %s failed:\n%s", p.Package, text)
	}
	p.Path = out
	return cleanup, nil
}

// buildScript runs the go command ("$@") under a shell whose SIGTERM, which
// the kernel sends it when gorun dies (Pdeathsig, buildProcAttr), kills
// its whole process group: the go command and the compilers and linker it
// runs. Pdeathsig on the go command itself would kill it alone: its
// children ran on to the end of their step, up to 8 s for the runtime's
// compile in a cold build of examples/gpt on the 2-core VM, 30 s for a
// package of 30,000 functions.
const buildScript = `trap 'kill -9 0' TERM
"$@" &
wait $!`

// buildCommand is the command that runs gobin with args: under sh
// (buildScript) where /bin/sh exists, else alone; either way in a process
// group of its own, which ctx's end kills whole. (A child of the go
// command leaves that group only by asking, and none of its tools asks.)
func buildCommand(ctx context.Context, gobin string, args []string) *exec.Cmd {
	var cmd *exec.Cmd
	if _, err := os.Stat("/bin/sh"); err == nil {
		cmd = exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", buildScript, "sh", gobin}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, gobin, args...)
	}
	cmd.SysProcAttr = buildProcAttr()
	// The group's leader is not reaped before Wait returns: its pid
	// cannot name another group meanwhile.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// runBuild runs cmd to its end on a thread of its own. Pdeathsig fires
// when the thread that started the child ends, not the process: the
// runtime ends a thread whose goroutine exits locked to it, and that
// would kill a build that gorun still waits for. So one goroutine locks a
// thread, starts cmd and waits for it there: no other goroutine runs on
// that thread, nor can end it, until the build has ended.
func runBuild(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- cmd.Run()
	}()
	return <-done
}

// buildDirName matches the build directories newBuildDir makes:
// gorun-build-PID-N. (Those of gorun before the lock, gorun-build-N, are
// never swept: one may belong to an older gorun still running.)
var buildDirName = regexp.MustCompile(`^gorun-build-[0-9]+-[0-9]+$`)

// newBuildDir makes a build directory in tmp, named for this process
// (gorun-build-PID-N), and holds an exclusive flock on it until lock is
// closed: the kernel drops the lock when gorun ends, however it ends, and
// a later gorun's sweepBuildDirs removes a directory whose lock it can
// take. A sweep that took the lock between the mkdir and the flock may
// have removed the directory: then it is made again.
func newBuildDir(tmp string) (dir string, lock *os.File, err error) {
	for range 3 {
		dir, err := os.MkdirTemp(tmp, "gorun-build-"+strconv.Itoa(os.Getpid())+"-")
		if err != nil {
			return "", nil, err
		}
		lock, err := os.Open(dir)
		if err != nil {
			return "", nil, err
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			lock.Close()
			os.Remove(dir)
			return "", nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		if sameDir(dir, lock) {
			return dir, lock, nil
		}
		lock.Close()
	}
	return "", nil, errors.New("make a build directory: removed as soon as made, three times")
}

// sameDir reports whether path is still the directory open as f.
func sameDir(path string, f *os.File) bool {
	fi, err := os.Lstat(path)
	fi2, err2 := f.Stat()
	return err == nil && err2 == nil && os.SameFile(fi, fi2)
}

// sweepBuildDirs removes the build directories in tmp that a gorun left
// behind: named as newBuildDir names them, this user's, and unlocked, so
// that the gorun that made them has ended without removing them (a
// SIGKILL, a crash). A directory whose lock is held, in whichever PID
// namespace, is a running gorun's, and is left alone; a pid in the name
// could be another process's by now, and is only for people to read. It
// reads tmp once, and runs only before a build.
func sweepBuildDirs(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	uid := os.Geteuid()
	for _, e := range entries {
		if !e.IsDir() || !buildDirName.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil && sameDir(dir, f) {
			os.RemoveAll(dir)
		}
		f.Close()
	}
}
