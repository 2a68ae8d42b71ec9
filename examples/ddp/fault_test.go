package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// TestRankKilled: a rank killed mid-training stops the job; gorun names
// it and exits with its status (128+9), and no rank is left running.
func TestRankKilled(t *testing.T) {
	gorun, ddp := build(t)
	cmd := exec.Command(gorun, append([]string{"-np", "3", "--timeout", "2m", ddp, "--steps", "1000000"}, small...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "step 5 ") {
	}
	ranks := children(t, cmd.Process.Pid, ddp)
	if len(ranks) != 3 {
		t.Fatalf("gorun has children %v running %s, want its 3 ranks", ranks, ddp)
	}
	victim := ranks[1]
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() {
		for lines.Scan() {
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("gorun still running a minute after a rank was killed:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 128+9 {
		t.Errorf("gorun: %v, want exit status 137\n%s", err, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "pid "+strconv.Itoa(victim)) || !strings.Contains(msg, "killed") {
		t.Errorf("gorun's message does not name the killed rank (pid %d):\n%s", victim, msg)
	}
	for _, pid := range ranks {
		if syscall.Kill(pid, 0) == nil {
			if state, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(state), ") Z ") {
				t.Errorf("rank pid %d outlived the job", pid)
			}
		}
	}
}

// children lists the pids of pid's children that run prog (Linux: each of
// its threads lists the children it started).
func children(t *testing.T, pid int, prog string) []int {
	t.Helper()
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	if len(files) == 0 {
		t.Skip("reading a process's children needs Linux's /proc")
	}
	var out []int
	for _, file := range files {
		b, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			// gorun's other children (its cgroup guard) run gorun.
			if exe, err := os.Readlink("/proc/" + f + "/exe"); err == nil && exe == prog {
				out = append(out, n)
			}
		}
	}
	sort.Ints(out)
	return out
}

// TestRestartResumes: under gorun --max-restarts, a rank killed in the
// middle of training stops the job, gorun starts it again, and it resumes
// from its last checkpoint: it finishes with the losses, step by step, of
// a run that was never interrupted.
func TestRestartResumes(t *testing.T) {
	gorun, ddp := build(t)
	args := append([]string{"--steps", "30", "--ckpt-every", "5"}, small...)
	want := losses(t, job(t, gorun, ddp, 2, append(args, "--ckpt", t.TempDir())...))
	dir, prof := t.TempDir(), t.TempDir()
	cmd := exec.Command(gorun, append([]string{"-np", "2", "--max-restarts", "1", "--timeout", "2m", "--profile", prof, ddp, "--ckpt", dir, "--resume", "--crash-at", "13"}, args...)...)
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gorun: %v\n%s%s", err, out, stderr.String())
	}
	for _, w := range []string{"no checkpoint at ", "restart 1: resuming from step 10\n"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(stderr.String(), "killed by signal 9") || !strings.Contains(stderr.String(), "restarting the job after its failure") {
		t.Errorf("gorun does not say that a rank was killed and the job restarted:\n%s", stderr.String())
	}
	got := losses(t, string(out))
	sameLosses(t, "restarted", got, want, 11, 30)
	restartedTraces(t, prof)
}

// restartedTraces checks the traces of the job TestRestartResumes ran
// under --profile: its second start's in the directory, whole, and its
// first's in start.0, rank 1's cut short where it was killed (its steps
// here take less than the recorder's 20 ms between writes, so what it
// keeps of them varies).
func restartedTraces(t *testing.T, prof string) {
	t.Helper()
	for r := range 2 {
		f, err := trace.ReadFile(filepath.Join(prof, trace.FileName(r)))
		if err != nil || f.Header.Restart != 1 {
			t.Errorf("rank %d's trace of the second start: %v, written by start %d", r, err, f.Header.Restart)
		}
		f, err = trace.ReadFile(filepath.Join(trace.StartDir(prof, 0), trace.FileName(r)))
		switch {
		case f == nil || f.Header.Restart != 0:
			t.Errorf("rank %d's trace of the first start: %v", r, err)
		case r == 0 && err != nil:
			t.Errorf("rank 0's trace of the first start: %v", err)
		case r == 1 && (!errors.Is(err, trace.ErrTruncated) || f.RTT == 0):
			t.Errorf("rank 1's trace of the first start, killed at step 13: %v, clock round trip %d; want it cut short, with its clock record", err, f.RTT)
		}
	}
}
