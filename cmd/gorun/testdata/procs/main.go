// Command procs prints its rank and the Go processors it runs with.
package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Printf("rank %s GOMAXPROCS=%d\n", os.Getenv("GORUN_RANK"), runtime.GOMAXPROCS(0))
}
