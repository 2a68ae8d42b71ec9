// Command percall times single collective calls back to back and prints,
// per rank, the mean and the percentiles of one call, the share of the
// time spent in calls slower than 10 times the median (the tail), and
// what the kernel says the rank's threads did meanwhile: voluntary and
// involuntary context switches (getrusage) and the time they spent
// runnable but waiting for a CPU (/proc/self/task/*/schedstat). Where
// collbench gives one mean per size, this shows whether a slow mean is
// every call or a few stalls, and whether the stalls are sleeps or waits
// for a core. A second line per rank splits its threads' runs (schedstat's
// timeslices, each an interval on a CPU) over the timed calls: the
// busiest thread's (the calls' goroutine's, while it keeps to one thread),
// Go's sysmon's (the thread asleep in nanosleep: it shares a bound rank's
// core and wakes every 20 us to 10 ms while a goroutine runs), and the
// others' (the runtime's other threads: an idle processor's, woken by
// wakep, which may take the calls' goroutine over; GC workers; the
// transport's receiver).
//
//	gorun -np 16 bench/percall --op allreduce --bytes 8 --calls 20000
//	GORUN_ALGO=recdbl gorun -np 16 bench/percall --op allreduce --bytes 8 --calls 2000
//	gorun -np 16 bench/percall --op allgather --bytes 1024 --barrier
//	gorun -np 2 bench/percall --bytes 64K --first 30
//	gorun -np 16 bench/percall --op allgather --bytes 1K --trace /tmp/r0.trace
//
// --first N times instead the job's first N calls, each after a barrier,
// and prints each, with the page faults the process took in it (those of
// its other threads too): the first carries what a job's first collective sets
// up (the model's probe, the shared area), the next ones the first
// touches of memory and the slot writer's start. bench/mpi/first.c does
// the same with Open MPI. --trace FILE writes rank 0's Go execution trace
// of the timed calls (go tool trace FILE): which goroutines and threads
// ran beside the calls.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

func main() {
	op := flag.String("op", "allreduce", "collective: allreduce or allgather (float32)")
	size := flag.String("bytes", "8", "bytes of the whole buffer (K, M suffixes)")
	calls := flag.Int("calls", 20000, "timed calls")
	warm := flag.Int("warmup", 2000, "calls before the timed ones")
	barrier := flag.Bool("barrier", false, "a barrier before every call, outside its time")
	first := flag.Int("first", 0, "time the job's first N calls one by one (each after a barrier), instead")
	traceTo := flag.String("trace", "", "write rank 0's Go execution trace of the timed calls to this file (go tool trace)")
	flag.Parse()
	if *first > 0 {
		*calls, *warm, *barrier = *first, 0, true
	}
	if err := run(*op, *size, *calls, *warm, *barrier, *first > 0, *traceTo); err != nil {
		fmt.Fprintln(os.Stderr, "percall:", err)
		os.Exit(1)
	}
}

func run(op, size string, calls, warm int, barrier, first bool, traceTo string) error {
	ctx := context.Background()
	nb, err := spmd.ParseSize(size)
	if err != nil {
		return fmt.Errorf("--bytes %q: %w", size, err)
	}
	if op != "allreduce" && op != "allgather" {
		return fmt.Errorf("--op %q: want allreduce or allgather", op)
	}
	if calls < 1 || warm < 0 {
		return fmt.Errorf("--calls %d, --warmup %d: want at least one call and no negative warm-up", calls, warm)
	}
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	var call func() error
	var out []float32
	switch op {
	case "allreduce":
		out = make([]float32, max(1, nb/4))
		call = func() error { return prims.AllReduce(ctx, w.Comm, out, prims.Sum[float32]()) }
	case "allgather": // a block of the buffer from every rank
		out = make([]float32, max(1, nb/4/w.Size())*w.Size())
		in := make([]float32, len(out)/w.Size())
		call = func() error { return prims.AllGather(ctx, w.Comm, in, out) }
	}
	ds := make([]float64, calls)
	faults := make([]int64, calls) // page faults per call, with first
	if !first {
		// These buffers set off a garbage collection that ran into the
		// timed calls (2,000,000 calls: 32 MB): its stop-the-world and
		// mark workers took a millisecond of the rank's core. Collected
		// here, before the warm-up, which then also takes the 50 polls,
		// 20 us apart, that sysmon makes after every stop-the-world
		// (about 1 ms; 4 on the VM: raise --warmup there).
		runtime.GC()
	}
	for range warm {
		if err := call(); err != nil {
			return err
		}
	}
	if err := w.Barrier(ctx); err != nil {
		return err
	}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	th0 := threadStats()
	_, wait0 := schedstat(th0)
	began := time.Now()
	var busy time.Duration
	if traceTo != "" && w.Rank() == 0 {
		f, err := os.Create(traceTo)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
	}
	for i := range ds {
		if barrier {
			if err := w.Barrier(ctx); err != nil {
				return err
			}
		}
		var f0, f1 syscall.Rusage
		if first {
			syscall.Getrusage(syscall.RUSAGE_SELF, &f0)
		}
		t := time.Now()
		if err := call(); err != nil {
			return err
		}
		d := time.Since(t)
		busy += d
		ds[i] = d.Seconds() * 1e6
		if first {
			syscall.Getrusage(syscall.RUSAGE_SELF, &f1)
			faults[i] = f1.Minflt - f0.Minflt + f1.Majflt - f0.Majflt
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	th1 := threadStats()
	threads, wait1 := schedstat(th1)
	wall := time.Since(began)
	trace.Stop() // a no-op where no trace runs
	if first {
		fmt.Printf("r%d %s %d B, the first %d calls (us):", w.Rank(), op, 4*len(out), calls)
		for _, d := range ds {
			fmt.Printf(" %.1f", d)
		}
		fmt.Printf("\nr%d page faults:", w.Rank())
		for _, f := range faults {
			fmt.Printf(" %d", f)
		}
		fmt.Println()
		return nil
	}
	slices.Sort(ds)
	med := ds[calls/2]
	var sum, tail float64
	for _, d := range ds {
		sum += d
		if d > 10*med {
			tail += d
		}
	}
	fmt.Printf("r%d %s %d B: mean %.3f us  p10 %.2f p50 %.2f p90 %.2f p99 %.2f max %.1f  tail %.0f%%  vol %d invol %d  threads %d runnable-wait %.2f ms\n",
		w.Rank(), op, 4*len(out), busy.Seconds()*1e6/float64(calls), ds[calls/10], med, ds[calls*9/10], ds[calls*99/100], ds[calls-1],
		100*tail/sum, ru1.Nvcsw-ru0.Nvcsw, ru1.Nivcsw-ru0.Nivcsw, threads, float64(wait1-wait0)/1e6)
	fmt.Printf("r%d threads over %.0f ms: %s\n", w.Rank(), wall.Seconds()*1e3, splitThreads(th0, th1))
	return nil
}

// thread is what the kernel counts of one thread of this process.
type thread struct {
	sched       bool  // the kernel has schedstat
	run, runs   int64 // ns on a CPU, and the intervals it ran (schedstat)
	wait        int64 // ns runnable, waiting for a CPU (schedstat)
	vol, invol  int64 // context switches: asleep, or switched out while runnable
	inNanosleep bool  // blocked in nanosleep when read: Go's sysmon
}

// threadStats reads every thread of this process, by thread id.
func threadStats() map[int]thread {
	ts := map[int]thread{}
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/self/task/" + e.Name()
		var t thread
		if b, err := os.ReadFile(dir + "/schedstat"); err == nil {
			_, err := fmt.Sscan(string(b), &t.run, &t.wait, &t.runs)
			t.sched = err == nil
		}
		if b, err := os.ReadFile(dir + "/status"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				k, v, _ := strings.Cut(l, ":")
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				switch k {
				case "voluntary_ctxt_switches":
					t.vol = n
				case "nonvoluntary_ctxt_switches":
					t.invol = n
				}
			}
		}
		if b, err := os.ReadFile(dir + "/syscall"); err == nil {
			nr, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
			t.inNanosleep = nr == strconv.Itoa(syscall.SYS_NANOSLEEP)
		}
		ts[tid] = t
	}
	return ts
}

// splitThreads says what the threads did between two readings: the
// one that ran longest (the calls' goroutine's, while it kept to one
// thread), sysmon, and the rest, each with its runs (intervals on a
// CPU), the time it ran and how often it was switched out while
// runnable (invol). sysmon is the thread in nanosleep at the end (the
// others that sleep wait on futexes).
func splitThreads(t0, t1 map[int]thread) string {
	busiest, sysmon := 0, 0
	for tid, t := range t1 {
		if t.inNanosleep && (sysmon == 0 || tid < sysmon) {
			sysmon = tid
		}
	}
	for tid, t := range t1 {
		if tid != sysmon && (busiest == 0 || diff(t0[tid], t).run > diff(t0[busiest], t1[busiest]).run) {
			busiest = tid
		}
	}
	var other thread
	others := 0
	for tid, t := range t1 {
		if tid == busiest || tid == sysmon {
			continue
		}
		d := diff(t0[tid], t)
		if d.runs > 0 {
			others++
		}
		other.runs += d.runs
		other.run += d.run
		other.invol += d.invol
	}
	b, s := diff(t0[busiest], t1[busiest]), diff(t0[sysmon], t1[sysmon])
	sys := "no sysmon seen (no thread in nanosleep)"
	if sysmon != 0 {
		sys = fmt.Sprintf("sysmon runs %d, %.1f us each", s.runs, float64(s.run)/1e3/float64(max(1, s.runs)))
	}
	return fmt.Sprintf("busiest runs %d, %.2f ms (invol %d)  %s  %d others runs %d, %.2f ms (invol %d)",
		b.runs, float64(b.run)/1e6, b.invol, sys, others, other.runs, float64(other.run)/1e6, other.invol)
}

// diff is what a thread did from a to b (a is zero for a thread that
// started between them).
func diff(a, b thread) thread {
	return thread{run: b.run - a.run, runs: b.runs - a.runs, vol: b.vol - a.vol, invol: b.invol - a.invol}
}

// schedstat returns the threads of ts that the kernel keeps schedstat
// for and the nanoseconds they have spent runnable and waiting for a CPU
// (0 where the kernel has none).
func schedstat(ts map[int]thread) (threads int, wait int64) {
	for _, t := range ts {
		if t.sched {
			threads++
			wait += t.wait
		}
	}
	return threads, wait
}
