// Package launch is the library behind gorun(1): it turns a Config into a
// Plan (rank -> host, local rank, environment), resolves or builds the
// program, starts every rank, forwards their output line by line, and
// supervises the job: the first failure, signals, the timeout and the exit
// status.
//
// The command in cmd/gorun only parses flags into a Config and calls Run.
// Starting a rank goes through a Starter, so that a remote agent (ssh, srun)
// can start the ranks of another host behind the same supervisor; Local
// starts them as child processes of this one.
package launch
