//go:build unix

package gemm

import "syscall"

// cpuSeconds is the CPU time, user and system, that this process has run
// for: on a machine shared with other work it times a benchmark better
// than the wall clock, which counts the time other processes ran.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
