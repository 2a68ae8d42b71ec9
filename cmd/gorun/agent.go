package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/spmd/launch"
)

// runAgent is gorun --agent: the agent of one host, started by gorun over
// ssh or srun, talking the agent protocol on stdin and stdout.
func runAgent(cliCtx *cli.Context) error {
	// A write to the launcher's closed pipe must be an error to handle
	// (stop the ranks), not a SIGPIPE that kills the agent.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	if code := launch.RunAgent(cliCtx.Context, os.Stdin, os.Stdout, os.Stderr, guardCommand()); code != 0 {
		return exitStatus(code)
	}
	return nil
}
