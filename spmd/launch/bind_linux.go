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

// startWith starts cmd with its CPU affinity set to cpus (nil: the
// starter's) and its timer slack set to slack (0: the starter's). A child
// inherits both from the thread that forks it, and os/exec forks on the
// calling thread: so a goroutine locks its thread, sets them on the
// thread, starts the child and restores them. The rank's Go runtime then
// sees only its CPUs (runtime.NumCPU, and so GOMAXPROCS), and every thread
// it makes inherits them. Should a restore fail, the goroutine ends with
// its thread locked, and the runtime discards the thread instead of
// handing it to other goroutines. A slack that auto chose and the kernel
// refuses (a seccomp filter) leaves the rank the starter's.
func startWith(cmd *exec.Cmd, cpus []int, slack timerSlack) error {
	if cpus == nil && slack.d <= 0 {
		return startCmd(cmd)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := true
		err := func() error {
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
				defer func() { restored = restored && unix.SchedSetaffinity(0, &old) == nil }()
			}
			if slack.d > 0 {
				old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
				if err == nil {
					err = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(slack.d.Nanoseconds()), 0, 0, 0)
				}
				switch {
				case err == nil:
					defer func() { restored = restored && unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0) == nil }()
				case !slack.auto:
					return fmt.Errorf("--timer-slack %v: prctl: %w", slack.d, err)
				}
			}
			return startCmd(cmd)
		}()
		if restored {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}
