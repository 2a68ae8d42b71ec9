package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/gorun-hpc/gorun/topo"
)

// The load of a host while gorun --tune times it: the times it measures
// are the host's, and a host that also ran other work (a build, a test
// suite, other machines through the hypervisor's steal) gives a table that
// later jobs follow at their cost. A tuning of 2 ranks on the 2-core VM
// while the test suite ran timed the shared broadcast of 32 B-2 KiB at
// 4-8 us and kept ring or linear, which took 3-5 us a call afterwards
// against 0.2-0.3 for the shared one.

// quietShare is the share of a host's CPU time beyond which the rest of
// the host (other processes, the hypervisor's steal) makes a tuning
// suspect.
const quietShare = 0.10

// userHz is the unit of /proc/stat's times (USER_HZ, 100 on Linux).
const userHz = 100

// hostCPU returns the seconds of CPU time the host's CPUs have spent busy
// (user, nice, system, irq, softirq and steal) and in all, from
// /proc/stat, and whether it could read them.
func hostCPU() (busy, total float64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fs := strings.Fields(sc.Text())
	if len(fs) < 9 || fs[0] != "cpu" {
		return 0, 0, false
	}
	var v [8]float64 // user nice system idle iowait irq softirq steal
	for i := range v {
		if v[i], err = strconv.ParseFloat(fs[i+1], 64); err != nil {
			return 0, 0, false
		}
	}
	busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return busy / userHz, (busy + v[3] + v[4]) / userHz, true
}

// ownCPU returns the seconds of CPU time this process has used.
func ownCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// loadSample is one rank's view of a stretch of time: its host's busy and
// total CPU seconds (known says whether it could read them) and its own.
type loadSample struct{ busy, total, own, known float64 }

// othersShare returns the largest share of a host's CPU time that was not
// the ranks' own over the stretch that samples (one per rank, in rank
// order) cover, among the hosts of lay, and the host's index; -1 when no
// host could say.
func othersShare(samples []loadSample, lay topo.Layout) (share float64, host int) {
	share, host = -1, -1
	for h, ranks := range lay.Hosts {
		s := samples[ranks[0]]
		if s.known == 0 || s.total <= 0 {
			continue
		}
		own := 0.0
		for _, r := range ranks {
			own += samples[r].own
		}
		if x := max(0, s.busy-own) / s.total; x > share {
			share, host = x, h
		}
	}
	return share, host
}
