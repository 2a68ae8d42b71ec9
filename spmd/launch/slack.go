package launch

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// Timer slack (--timer-slack): how late the kernel may fire a rank's
// timers, prctl(PR_SET_TIMERSLACK), which a child inherits from the
// thread that forks it. Linux's default is 50 us.
//
// By default (auto) a starter gives autoTimerSlack to each rank it binds
// to one CPU of its own (no other rank bound to it) whose program is a Go
// binary, on a host of at most autoSlackMaxRanks ranks, and leaves every
// other rank the slack it inherits; a program
// started through a wrapper (env, numactl, sh -c) is the wrapper's, and
// gets none. Why (issue #29, the 2-core development
// VM, np 2 bound): a Go process's sysmon thread shares the rank's one CPU.
// After a P is retaken from a syscall — with GOMAXPROCS 2 that takes one
// sysmon tick whenever the other P is busy — after every garbage
// collection's stop-the-world, and after any syscall entered while all
// Ps were idle, sysmon polls every 20 us for a few milliseconds: on this
// VM a tick every ~87 us that costs ~10 us, a tenth of the CPU taken from
// the rank's polling and compute. The slack stretches those 20-us sleeps
// to about 500 us, where the runtime's own sleeps (netpoll waits, whole
// milliseconds) barely move. Measured with alternating runs, --timer-slack
// 0 against auto: the first 20,000 8-byte broadcasts of a job ran 1.29-1.36x
// slower than the settled ones, 1.07-1.08x with the slack; a 64 KiB
// send/receive hand-off between two ranks with ~0.5 ms of compute a step
// took 1082-1108 us a step, 924-934 with the slack (965-982 with 1 ms;
// 200 us barely helped; 4 ms broke the runtime's linger timers, 2300 us);
// collbench's small all-reduces and all-gathers ran 5-30% faster;
// examples/gpt, examples/ddp and the launch time did not move.
//
// Only there: the slack stretches every short sleep of the rank's
// threads, and the Go scheduler backs off 3 us (usleep) before it steals
// the goroutine a running P is about to run. On one CPU that back-off
// yields the CPU to the P it waits for, and a channel-fed pool of
// workers took as long with the slack as without (580-593 ms); with a
// second CPU for the second P it waited for nothing, up to 500 us each
// time, and the same pool, unbound on 2 CPUs, took 507-519 ms against
// 408-412. A core of two hardware threads, an unbound rank and a rank
// bound to a socket therefore get no slack unless the user asks, nor does
// a program that is not Go (no sysmon).
const autoTimerSlack = 500 * time.Microsecond

// autoSlackMaxRanks is the most ranks a host may run for auto to give its
// bound Go ranks the slack. On the 16-core machine (issue #29), 16 bound
// ranks with the slack (percall at np 16, two runs each, against
// --timer-slack 0): 1 KiB all-gathers each after a message barrier took
// 296-337 us on average (p90 1.35-1.52 ms) against 6.4-6.9; the model's
// probe timed a barrier round at 315-404 us against 1.6-1.9 (one run of
// four at 1.7), and a job's first all-reduce, which runs the probe, took
// 44-116 ms against 12-20; 100-200 us of slack still made the barriers'
// p99 1.1-1.3 ms. Only the all-reduces and all-gathers back to back were
// better with it (p99 3.5-6.3 us against 13-15). A wake-up on the message
// path waits out one of the runtime's short sleeps, it seems, that the
// slack stretches; with 2 ranks, whose barrier is one round, it did not
// show (1 KiB all-gathers after a barrier at np 2 on the VM: 0.21-0.32
// against 0.20-0.24 us), and the small collectives ran 7-30% faster
// (collbench np 2, 3 alternating runs, 8 B-4 KiB, session 33). Between
// 3 and 15 ranks nothing was measured, so auto gives none there.
const autoSlackMaxRanks = 2

// maxTimerSlack bounds --timer-slack: past a millisecond or so the slack
// delays the runtime's own timers (4 ms made a hand-off twice as slow).
const maxTimerSlack = time.Second

// parseTimerSlack reads --timer-slack: "" or auto (-1), 0 (leave the
// inherited slack), or a duration up to maxTimerSlack.
func parseTimerSlack(s string) (time.Duration, error) {
	switch s {
	case "", "auto":
		return -1, nil
	case "0":
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxTimerSlack {
		return 0, fmt.Errorf("%q: want auto, 0, or a duration up to %v such as 500us", s, maxTimerSlack)
	}
	return d, nil
}

// timerSlack is the slack a rank starts with: d (0 leaves the inherited
// one), and whether auto chose it, in which case a kernel that refuses it
// leaves the rank with the inherited one instead of failing its start.
type timerSlack struct {
	d    time.Duration
	auto bool
}

// slackFor is the timer slack to start the rank with, from its
// GORUN_TIMER_SLACK (env), its binding and its program (path). Auto gives
// autoTimerSlack to a Go program bound alone to one CPU (see above).
func slackFor(env []string, b binding, path string) (timerSlack, error) {
	v, _ := envValue(env, contract.EnvTimerSlack)
	d, err := parseTimerSlack(v)
	if err != nil {
		return timerSlack{}, errorf(ErrUsage, "%s %w", contract.EnvTimerSlack, err)
	}
	if d >= 0 {
		return timerSlack{d: d}, nil
	}
	if len(b.cpus) != 1 || b.ranks != 1 || b.host > autoSlackMaxRanks || !isGoProgram(path) {
		return timerSlack{}, nil
	}
	return timerSlack{d: autoTimerSlack, auto: true}, nil
}

// notGoProgram says whether path is an executable of this machine that is
// not a Go binary: a Python or C program, whose ranks GOMAXPROCS does not
// concern (though their Go children would read it). A path that is not
// here (a program of other hosts, a package) is not known not to be Go.
func notGoProgram(path string) bool {
	goBin, here := goProgram(path)
	return here && !goBin
}

// goPrograms caches isGoProgram by path, size and modification time: a
// host starts many ranks of one program, which a restart may find rebuilt.
var goPrograms sync.Map // programKey → bool

type programKey struct {
	path string
	size int64
	mod  time.Time
}

// isGoProgram says whether the executable at path is a Go binary (it
// carries Go's build information).
func isGoProgram(path string) bool {
	goBin, _ := goProgram(path)
	return goBin
}

// goProgram says whether the file at path is a Go binary, and whether it
// exists.
func goProgram(path string) (goBin, here bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return false, false
	}
	key := programKey{path, fi.Size(), fi.ModTime()}
	if v, ok := goPrograms.Load(key); ok {
		return v.(bool), true
	}
	_, err = buildinfo.ReadFile(path)
	goPrograms.Store(key, err == nil)
	return err == nil, true
}
