package spmd

import (
	"context"
	"runtime"
	"time"

	"github.com/gorun-hpc/gorun/spmd/transport"
	"golang.org/x/sys/unix"
)

// pollBudget is how long a goroutine waiting for a request drives a
// transport.Poller itself before it blocks until the transport's receiver
// wakes it: long enough to cover a hop between busy ranks, short enough
// that a rank waiting for a slow peer soon stops taking a core.
const pollBudget = 100 * time.Microsecond

// poll drives p on the calling goroutine until r completes, ctx ends or the
// budget runs out, and reports whether r completed (its token taken).
func (r *Request) poll(ctx context.Context, p transport.Poller) bool {
	p.BeginPoll()
	defer p.EndPoll()
	idle := idler{budget: pollBudget, yield: r.e.crowded}
	for {
		select {
		case <-r.done:
			return true
		case <-ctx.Done():
			return false
		default:
		}
		if p.Poll() {
			idle.n = 0
			continue
		}
		if !idle.again() {
			return false
		}
	}
}

// idler is how a polling goroutine passes the time between polls: it
// yields the Go processor (so that a goroutine a delivery woke runs) and,
// on a host with more ranks than cores, after the first few polls also the
// core (sched_yield, so that the process that must produce the data runs),
// for at most its budget. With a core per rank, sched_yield only hands the
// core to the process's own idle threads: it made a round trip three times
// slower.
type idler struct {
	budget time.Duration
	yield  bool
	start  time.Time
	n      int
}

// again passes one round and reports whether to keep polling.
func (i *idler) again() bool {
	if i.n == 0 {
		i.start = time.Now()
	}
	i.n++
	runtime.Gosched()
	if i.yield && i.n > 4 {
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	return i.n%8 != 0 || time.Since(i.start) <= i.budget
}
