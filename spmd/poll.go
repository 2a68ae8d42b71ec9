package spmd

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// pollBudget is how long a goroutine waiting for a request drives a
// transport.Poller itself before it blocks until the transport's receiver
// wakes it, and how long WaitShared polls before it sleeps, with a core
// per rank: long enough to cover a hop between busy ranks and the
// hiccups of the ranks around it, short enough that a rank waiting for a
// slow peer soon stops taking its core. It was 100 us: on 16 cores at np
// 16 a rank that slept took about a millisecond to be woken and arrive,
// and a barrier's every round could meet one. 1 ms against 100 us there
// (percall, 3 runs each in turns, Open MPI beside): 1 KiB all-gathers
// each after a barrier 3.2-4.6 us on average against 11-22, p99 23-50 us
// against 85-1107, slowest 139-268 us against 1.3-3.9 ms; a job's second
// to fourth all-reduces, each after a barrier, 2-210 us against up to 1.1
// ms; 20,000 8-byte all-reduces back to back alike (p99 13 us); collbench's
// 8 B-4 KiB all-reduces 0.37-1.01x Open MPI's against 0.55-1.31x. Polling
// WaitShared alone for 1 ms did not do it (0.43-1.25x, the barrier's p99
// 180-1060 us).
const pollBudget = time.Millisecond

// sharedRuntimePollBudget is pollBudget where this process runs more
// worlds than Go processors (manyWorlds): ranks that are goroutines of one
// process, as in spmdtest, poll on the processors the ranks they wait for
// need. With the 1 ms budget, go test -race ./prims took 99 s against 89
// with this one (the 2-core VM), where a test's 5 ranks share 2.
const sharedRuntimePollBudget = 100 * time.Microsecond

// liveWorlds counts the worlds of this process that New made and Close has
// not closed; manyWorlds says whether they outnumber the Go processors;
// spareProcs, that there is one world and more than one processor: the
// ranks a goroutine waits for are other processes, and a yield of its
// processor wakes an idle one's thread (see sharedYield).
var (
	liveWorlds atomic.Int32
	manyWorlds atomic.Bool
	spareProcs atomic.Bool
)

// countWorld adds d to the live worlds and says again whether they
// outnumber GOMAXPROCS, and whether processors are to spare.
func countWorld(d int32) {
	n, procs := int(liveWorlds.Add(d)), runtime.GOMAXPROCS(0)
	manyWorlds.Store(n > procs)
	spareProcs.Store(n <= 1 && procs > 1)
}

// crowdedPollBudget is pollBudget on a host with more ranks than cores.
// There a polling rank yields its core at every round (see idler), so a
// longer spin costs the ranks that need the core a syscall per round,
// while blocking costs a futex wake and a scheduling delay per message.
// Against 100 us, alternating runs of collbench on 2 cores: 8-byte
// all-reduce at np 8 94-172 -> 72-115 us (5 ms: 54-74), broadcast at np
// 4 of 1 MiB 1.7-2.3 -> 2.7-3.3 GB/s.
const crowdedPollBudget = 2 * time.Millisecond

// pollPerByte and maxSizeBudget: with a core per rank, a request polls
// longer the larger its message, as long as the bytes would take to copy
// at 1 GB/s, up to maxSizeBudget more. A send that its receiver copies
// out of our memory (single copy) makes no progress here while the copy
// runs: a 1 MiB segment takes 100-200 us, past pollBudget, so the sender
// slept, and each such send cost the wake-ups of its receiver thread and
// of itself. All-gather of 4 MiB at np 2 on 2 cores (ring, 1 MiB
// segments), 30 calls each after a barrier: 4-26 context switches in most
// calls, which took 400-1100 us, against none in most and 114-200 us
// (Open MPI 211). collbench at np 2, medians of 7 alternating runs,
// before -> after (Open MPI): ring all-gather 1 MiB 58 -> 37 us (52), 2
// MiB 205 -> 159 (106), 4 MiB 422 -> 373 (206), 8 MiB 949 -> 626 (434);
// tree broadcast (5 runs) 4 MiB 264 -> 160 (269), 8 MiB 498 -> 293 (832).
const (
	pollPerByte   = time.Nanosecond
	maxSizeBudget = 10 * time.Millisecond
)

// budgetFor is how long a request of n bytes polls before it sleeps, on a
// crowded host or not.
func budgetFor(n int, crowded bool) time.Duration {
	if crowded {
		return crowdedPollBudget
	}
	base := pollBudget
	if manyWorlds.Load() {
		base = sharedRuntimePollBudget
	}
	return base + min(time.Duration(n)*pollPerByte, maxSizeBudget)
}

// poll drives p on the calling goroutine until r completes, ctx ends or the
// budget runs out, and reports whether r completed (its token taken). The
// loop looks at r's completion flag, not its channel, and at ctx only every
// 16 rounds: a select per round took a quarter of a polling rank's cycles
// in an 8-byte all-reduce (channel locks), all of it latency.
//
// A send that its receiver copies out of our memory is polled for too, on
// a crowded host as elsewhere. It used not to be there, when the idler
// held the core for its first rounds and the copier needed it; since the
// idler yields the core every round, a blocked sender only added a wake-up
// of its receiver thread and of itself to every exchange: Rabenseifner
// all-reduce at np 4 on 2 cores, 3 alternating runs, 1 MiB 2.8-3.6 ->
// 1.0-1.5 ms, 2 MiB 2.9-7.9 -> 2.1-2.5 ms, 8 MiB 11.3-15.4 -> 10.2-11.3
// ms; all-gather np 4 at 1 MiB 0.75-1.38 -> 1.58-1.90 GB/s; broadcast np 4
// and np 8 within noise (at 4-16 MiB perhaps 5-10% slower).
func (r *Request) poll(ctx context.Context, p transport.Poller) bool {
	if l, ok := p.(transport.PollLimiter); ok && r.e.crowded && len(r.buf) > l.PollLimit() {
		return false
	}
	p.BeginPoll()
	defer p.EndPoll()
	idle := idler{budget: budgetFor(len(r.buf), r.e.crowded), yield: r.e.crowded}
	done := ctx.Done()
	for i := 0; ; i++ {
		if r.finished() {
			return true
		}
		if done != nil && i%16 == 15 {
			select {
			case <-done:
				return false
			default:
			}
		}
		if p.Poll() {
			idle.n, idle.start = 0, time.Time{}
			continue
		}
		if !idle.again() {
			return false
		}
	}
}

// idler is how a polling goroutine passes the time between polls: it
// yields the Go processor now and then (so that a goroutine a delivery
// woke runs) and, on a host with more ranks than cores, after
// every poll also the core (sched_yield, so that the process that must
// produce the data runs), for at most its budget.
//
// A Gosched puts the goroutine on the global run queue and wakes an idle
// P's thread to look for work (wakep), which then takes a share of the
// cores; so it goes only every 16th round with a core per rank (a Gosched
// per round had half an 8-byte ping-pong's cycles in the scheduler: 1.78
// us per hop before, 1.59 us after, medians of 9 alternating runs) and
// every 64th on a crowded host, where every round yields the core with
// sched_yield as a raw syscall. There each Gosched also woke an idle P's
// thread, which then competed with the ranks for the cores: with a
// Gosched every 8th round and the first 4 rounds without sched_yield, an
// 8-byte all-reduce took 18-35 us at np 4 and 133-219 us at np 8 on 2
// cores; with this, 15-18 and 65-107 us. With a core per rank,
// sched_yield only hands the core to the process's own idle threads: it
// made a round trip three times slower.
type idler struct {
	budget time.Duration
	yield  bool
	start  time.Time
	n      int
}

// again passes one round and reports whether to keep polling.
func (i *idler) again() bool {
	i.n++
	if !i.yield {
		if i.n%16 == 0 {
			runtime.Gosched()
		}
		return i.n%64 != 0 || i.within()
	}
	if i.n%64 == 0 {
		runtime.Gosched()
	}
	unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	return i.n%8 != 0 || i.within()
}

// within reports whether the budget is not spent, counting from the first
// time it is asked (the 64th empty round, the 8th crowded), so that a
// short wait reads no clock: the read at every wait's first empty round
// was 6.5% of an 8-byte ping-pong's samples on the VM's kvm-clock (perf),
// and a message that came during it waited for it. examples/pingpong at
// np 2, 6 runs in turns: 8 B 0.45-0.46 us a hop against 0.47-0.49 (Open
// MPI's 0.35-0.38, measured beside).
func (i *idler) within() bool {
	if i.start.IsZero() {
		i.start = time.Now()
		return true
	}
	return time.Since(i.start) <= i.budget
}
