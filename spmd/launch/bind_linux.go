package launch

import (
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// hostCPUs lists the CPUs this process may run on, with their topology,
// read once: the set a starter binds ranks within.
var hostCPUs = sync.OnceValues(func() ([]cpuInfo, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return readTopology(cpus), nil
})

// startWith starts cmd with its CPU affinity set to cpus (nil: the
// starter's) and its timer slack set to slack (0: the starter's). A child
// inherits both from the thread that forks it, and os/exec forks on the
// calling thread: so the goroutine locks its thread, sets them on the
// thread, starts the child and restores them. The rank's Go runtime then
// sees only its CPUs (runtime.NumCPU, and so GOMAXPROCS), and every thread
// it makes inherits them.
func startWith(cmd *exec.Cmd, cpus []int, slack time.Duration) error {
	if cpus == nil && slack <= 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cpus != nil {
		var set, old unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return fmt.Errorf("sched_getaffinity: %w", err)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("bind to cpus %s: sched_setaffinity: %w", cpuList(cpus), err)
		}
		defer unix.SchedSetaffinity(0, &old)
	}
	if slack > 0 {
		old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		if err != nil {
			return fmt.Errorf("prctl(PR_GET_TIMERSLACK): %w", err)
		}
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack.Nanoseconds()), 0, 0, 0); err != nil {
			return fmt.Errorf("timer slack %v: prctl(PR_SET_TIMERSLACK): %w", slack, err)
		}
		defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
	}
	return cmd.Start()
}
