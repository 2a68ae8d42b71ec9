// Command gorun starts the ranks of an SPMD program and supervises them.
// See gorun(1).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gorun-hpc/gorun/spmd/launch"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// The supervisor sees every signal, the second Ctrl-C included.
	sigs := make(chan os.Signal, 8)
	// SIGPIPE too, as the agent does: a write to a closed stdout or
	// stderr then fails instead of killing gorun, and the supervisor stops
	// the job.
	// SIGTSTP (Ctrl-Z) and SIGCONT: the supervisor stops and continues
	// the ranks, in process groups of their own, with gorun.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGCONT)
	// Orphans of the ranks (daemons that detached) come to gorun, and
	// die when the job is over: no process of the job outlives gorun.
	launch.Subreap()
	err := newApp(sigs).RunContext(ctx, os.Args)
	launch.KillOrphans()
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
