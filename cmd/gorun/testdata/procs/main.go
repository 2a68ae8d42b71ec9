// Command procs prints its rank, the Go processors it runs with and its
// timer slack in nanoseconds.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

func main() {
	rank := os.Getenv("GORUN_RANK")
	fmt.Printf("rank %s GOMAXPROCS=%d\n", rank, runtime.GOMAXPROCS(0))
	slack, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("rank %s timerslack=%s\n", rank, strings.TrimSpace(string(slack)))
}
