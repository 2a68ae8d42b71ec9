// Command goprof reads the trace files of a gorun --profile job and
// reports where its time went: tables, wait states, a timeline for
// Perfetto, pictures, pprof profiles, and the difference between two
// runs. See goprof(1).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, newApp(), os.Args)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
