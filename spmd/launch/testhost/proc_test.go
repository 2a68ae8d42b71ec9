package testhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("Alive(own pid) = false")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("testhost: cannot run true: " + err.Error())
	}
	if Alive(dead.Process.Pid) {
		t.Errorf("Alive(%d), a reaped child, = true", dead.Process.Pid)
	}
}

func TestOwnerAlive(t *testing.T) {
	tests := []struct {
		name string
		pid  string
		base int
		want bool
	}{
		{"own pid", strconv.Itoa(os.Getpid()), 10, true},
		{"own pid in hex", strconv.FormatInt(int64(os.Getpid()), 16), 16, true},
		{"unparsable", "zz", 10, true},
		{"no such pid", "2147483647", 10, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := OwnerAlive(tc.pid, tc.base); got != tc.want {
				t.Errorf("OwnerAlive(%q, %d) = %v, want %v", tc.pid, tc.base, got, tc.want)
			}
		})
	}
}

func TestKillAll(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Skip("testhost: cannot run sleep: " + err.Error())
	}
	exited := make(chan struct{})
	go func() { sleep.Wait(); close(exited) }()
	err := KillAll(func() ([]int, error) {
		select {
		case <-exited:
			return nil, nil
		default:
			return []int{sleep.Process.Pid}, nil
		}
	})
	if err != nil {
		t.Fatalf("KillAll: %v", err)
	}
}

func TestSweepDirs(t *testing.T) {
	const prefix = "gorun-testhost-"
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("testhost: cannot run true: " + err.Error())
	}
	mkdir := func(pid int) string {
		d, err := os.MkdirTemp("", prefix+strconv.Itoa(pid)+"-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	stale, live := mkdir(dead.Process.Pid), mkdir(os.Getpid())
	var before []string
	SweepDirs(prefix, regexp.MustCompile(`^`+prefix+`(\d+)-`), func(d string) { before = append(before, filepath.Base(d)) })
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale dir %s still exists after SweepDirs: %v", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live dir %s removed by SweepDirs: %v", live, err)
	}
	if len(before) != 1 || before[0] != filepath.Base(stale) {
		t.Errorf("before called with %v, want [%s]", before, filepath.Base(stale))
	}
}
