package launch

import (
	"fmt"
	"os/exec"
	"runtime"
	"sync"

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

// startBound starts cmd with its CPU affinity set to cpus. A child inherits
// the affinity of the thread that forks it, and os/exec forks on the
// calling thread: so the goroutine locks its thread, narrows the thread's
// affinity, starts the child and widens it again. The rank's Go runtime
// then sees only its CPUs (runtime.NumCPU, and so GOMAXPROCS), and every
// thread it makes inherits them.
func startBound(cmd *exec.Cmd, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("bind to cpus %s: sched_setaffinity: %w", cpuList(cpus), err)
	}
	err := cmd.Start()
	unix.SchedSetaffinity(0, &old)
	return err
}
