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
	ranks := children(t, cmd.Process.Pid)
	if len(ranks) != 3 {
		t.Fatalf("gorun has children %v, want its 3 ranks", ranks)
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

// children lists the pids of pid's children (Linux: each of its threads
// lists the children it started).
func children(t *testing.T, pid int) []int {
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
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}
