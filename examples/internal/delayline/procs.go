//go:build linux

package delayline

import (
	"runtime"
	"sync"
)

// procs raises GOMAXPROCS by one for each thread of the lines open, and
// puts it back when the last line closes. A line's thread spends its life
// in ppoll, a system call, holding a P in the Go scheduler: without a P to
// spare, the process's other goroutines (the programs the line serves,
// when they run in this process) wait for the scheduler to take the P back
// from the sleeping thread, and the thread, when it wakes, waits in turn
// for a P. Either wait adds tens of microseconds to hundreds.
var procs struct {
	mu    sync.Mutex // protects following
	extra int        // threads of open lines
	base  int        // GOMAXPROCS before the first of them
}

// reserveProcs adds n threads to GOMAXPROCS.
func reserveProcs(n int) {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.extra == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.extra += n
	runtime.GOMAXPROCS(procs.base + procs.extra)
}

// releaseProcs takes n threads back from GOMAXPROCS.
func releaseProcs(n int) {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	procs.extra -= n
	runtime.GOMAXPROCS(procs.base + procs.extra)
}
