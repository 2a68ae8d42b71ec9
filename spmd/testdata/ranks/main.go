// Command ranks is the rank program of spmd's process tests; its first
// argument picks what it does.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

func main() {
	ctx := context.Background()
	mode := "hello"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if mode == "late" && os.Getenv("GORUN_RANK") == "2" {
		time.Sleep(30 * time.Second) // never arrives within the init timeout
		return
	}
	switch mode {
	case "crash", "shmcrash", "offercrash", "sharedcrash":
		if os.Getenv("GORUN_RANK") == "0" {
			// Rank 0 outlives gorun's stop to report what its call
			// returned; from before Init, since rank 1 may be dead before
			// rank 0's Init returns.
			signal.Ignore(syscall.SIGTERM)
		}
	}
	w, err := spmd.Init(ctx)
	if err != nil {
		fmt.Println("init failed:", err)
		os.Exit(1)
	}
	defer w.Close()
	switch mode {
	case "hello":
		fmt.Printf("rank %d of %d\n", w.Rank(), w.Size())
		err = w.Barrier(ctx)
	case "crash":
		err = crash(ctx, w)
	case "shmcrash":
		err = shmCrash(ctx, w)
	case "offercrash":
		err = offerCrash(ctx, w)
	case "sharedcrash":
		err = sharedCrash(ctx, w)
	case "procs":
		fmt.Printf("rank %d GOMAXPROCS=%d\n", w.Rank(), runtime.GOMAXPROCS(0))
		err = w.Barrier(ctx)
	case "errclose":
		// Rank 0 fails on its own, closes its world as a deferred Close
		// would, and takes a while to exit; the others then lose it and
		// exit at once, first.
		if err = w.Barrier(ctx); err != nil {
			break
		}
		if w.Rank() == 0 {
			w.Close()
			time.Sleep(300 * time.Millisecond)
			fmt.Println("rank 0 failed on its own")
			os.Exit(1)
		}
		_, err = w.Recv(ctx, 0, 5, make([]byte, 1))
	case "membarrier":
		// Before any use of shared memory no thread waits in membarrier's
		// registration, whose RCU grace period would hold the exit.
		fmt.Printf("rank %d: threads in membarrier after Init: %d\n", w.Rank(), inMembarrier())
		err = w.Barrier(ctx)
	case "twice":
		if _, err2 := spmd.Init(ctx); err2 != nil {
			fmt.Println("second init:", err2)
		}
		err = w.Barrier(ctx)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

// goAhead tells rank 1 that rank 0 is past its setup, so that what rank 1
// does next (dying) meets rank 0 in the call under test. A barrier did not
// do it: rank 1 may leave one while rank 0 still waits in it for rank 2,
// which gorun stops once rank 1 dies, and then rank 0's barrier failed
// on rank 2 (one CI run of TestProcessSHMCrash).
func goAhead(ctx context.Context, w *spmd.World) error {
	switch w.Rank() {
	case 0:
		return w.Send(ctx, 1, 1, []byte{1})
	case 1:
		_, err := w.Recv(ctx, 0, 1, make([]byte, 1))
		return err
	}
	return nil
}

// crash: rank 1 dies while rank 0 waits for a message from it; rank 0
// reports what its receive returned and how long it took.
func crash(ctx context.Context, w *spmd.World) error {
	if err := goAhead(ctx, w); err != nil {
		return err
	}
	switch w.Rank() {
	case 1:
		time.Sleep(200 * time.Millisecond)
		os.Exit(7)
	case 0:
		start := time.Now()
		_, err := w.Recv(ctx, 1, 0, make([]byte, 8))
		var pe *spmd.PeerError
		fmt.Printf("lost=%v rank=%d after=%v: %v\n", errors.Is(err, spmd.ErrPeerLost),
			func() int {
				errors.As(err, &pe)
				if pe == nil {
					return -1
				}
				return pe.Rank
			}(),
			time.Since(start).Round(time.Millisecond), err)
		os.Exit(0)
	}
	select {} // the others wait to be stopped
}

// shmCrash: ranks stream messages to rank 0; rank 1 SIGKILLs itself in the
// middle, after leaving a file in /dev/shm as a crash between creating and
// removing its segment would. Rank 0 reports what its receive returned.
func shmCrash(ctx context.Context, w *spmd.World) error {
	if w.Rank() == 0 {
		fmt.Printf("job %s\n", os.Getenv("GORUN_JOB_ID"))
	}
	if err := goAhead(ctx, w); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	switch w.Rank() {
	case 1:
		name := fmt.Sprintf("/dev/shm/gorun-%s-r%d-00112233deadbeef.new", os.Getenv("GORUN_JOB_ID"), w.Rank())
		os.WriteFile(name, []byte("x"), 0o600)
		for i := 0; i < 20; i++ {
			if err := w.Send(ctx, 0, 0, buf); err != nil {
				return err
			}
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case 0:
		for {
			if _, err := w.Recv(ctx, 1, 0, buf); err != nil {
				fmt.Printf("lost=%v: %v\n", errors.Is(err, spmd.ErrPeerLost), err)
				os.Exit(0)
			}
		}
	}
	select {}
}

// sharedCrash: the ranks run all-reduces through the memory they share
// (prims' Shared algorithm, no messages) until rank 1 is SIGKILLed in the
// middle of them; rank 0 reports what its all-reduce returned. Rank 1
// leaves a file named like a shared area behind, for the launcher's
// cleanup to remove.
func sharedCrash(ctx context.Context, w *spmd.World) error {
	if w.Rank() == 0 {
		fmt.Printf("job %s\n", os.Getenv("GORUN_JOB_ID"))
	}
	buf := make([]float64, 1000)
	for i := 0; ; i++ {
		if w.Rank() == 1 && i == 2000 {
			os.WriteFile(fmt.Sprintf("/dev/shm/gorun-%s-s0011223344556677", os.Getenv("GORUN_JOB_ID")), []byte("x"), 0o600)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		err := prims.AllReduce(ctx, w.Comm, buf, prims.Sum[float64](), prims.WithAlgo(topo.Shared))
		if err != nil && w.Rank() == 0 {
			fmt.Printf("lost=%v after %d: %v\n", errors.Is(err, spmd.ErrPeerLost), i, err)
			os.Exit(0)
		}
		if err != nil {
			select {} // wait to be stopped
		}
	}
}

// offerCrash: rank 1 starts a large send that rank 0 has no receive for
// yet, so that rank 0 keeps it as an offer in rank 1's memory, and is
// SIGKILLed; rank 0 then posts the receive and reports what it returned.
func offerCrash(ctx context.Context, w *spmd.World) error {
	buf := make([]byte, 1<<20)
	switch w.Rank() {
	case 1:
		if err := w.Send(ctx, 0, 0, buf); err != nil { // rank 0 learns it may read our memory
			return err
		}
		w.Isend(ctx, 0, 5, buf)
		if err := w.Send(ctx, 0, 6, []byte("sent")); err != nil {
			return err
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case 0:
		if _, err := w.Recv(ctx, 1, 0, buf); err != nil {
			return err
		}
		if _, err := w.Recv(ctx, 1, 6, make([]byte, 4)); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond) // rank 1 is dead by now
		_, err := w.Recv(ctx, 1, 5, buf)
		fmt.Printf("lost=%v: %v\n", errors.Is(err, spmd.ErrPeerLost), err)
		os.Exit(0)
	}
	select {}
}

// inMembarrier counts this process's threads blocked in the membarrier
// system call (/proc/self/task/*/syscall starts with its number).
func inMembarrier() int {
	tasks, _ := os.ReadDir("/proc/self/task")
	n := 0
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/syscall")
		if err == nil && strings.HasPrefix(string(b), strconv.Itoa(unix.SYS_MEMBARRIER)+" ") {
			n++
		}
	}
	return n
}
