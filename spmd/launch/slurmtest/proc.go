package slurmtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/spmd/launch/testhost"
)

// dirPrefix starts the name of every rig's temp dir: gorun-slurmtest-<pid>-<seq>-*.
const dirPrefix = "gorun-slurmtest-"

// proc is one process, as far as the rig cares.
type proc struct {
	pid, ppid int
	conf      string // the SLURM_CONF in its environment, if any
}

// procs lists the machine's processes with their parents and SLURM_CONF.
// Processes that end while being read are left out.
func procs() []proc {
	ents, _ := os.ReadDir("/proc")
	var ps []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p := proc{pid: pid, ppid: ppid(pid)}
		if p.ppid < 0 {
			continue
		}
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
			p.conf = envValue(env, "SLURM_CONF")
		}
		ps = append(ps, p)
	}
	return ps
}

// envValue finds name's value in a NUL-separated environment block.
func envValue(env []byte, name string) string {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// ppid returns pid's parent, or -1 if it cannot be read.
func ppid(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// "pid (comm) S ppid ...": the command name may hold spaces and ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return -1
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return n
}

// matching returns the processes whose SLURM_CONF satisfies match, and all
// their descendants, except the calling process.
func matching(match func(conf string) bool) []int {
	ps := procs()
	in := map[int]bool{}
	for _, p := range ps {
		if p.conf != "" && match(p.conf) && p.pid != os.Getpid() {
			in[p.pid] = true
		}
	}
	for grew := true; grew; { // add children until nothing changes
		grew = false
		for _, p := range ps {
			if !in[p.pid] && in[p.ppid] && p.pid != os.Getpid() {
				in[p.pid], grew = true, true
			}
		}
	}
	var pids []int
	for _, p := range ps {
		if in[p.pid] && testhost.Alive(p.pid) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// killAll SIGKILLs the processes list returns until it returns none, or
// fails after 5 s.
func killAll(list func() []int) error {
	return testhost.KillAll(func() ([]int, error) { return list(), nil })
}

var staleDir = regexp.MustCompile(`^` + dirPrefix + `(\d+)-\d+-`)

// sweep kills the processes and removes the temp dirs of rigs whose test
// binary died without closing them (its pid no longer exists).
func sweep() {
	testhost.SweepDirs(dirPrefix, staleDir, func(d string) {
		inDir := func(conf string) bool { return strings.HasPrefix(conf, d+string(filepath.Separator)) }
		_ = killAll(func() []int { return matching(inDir) })
	})
}
