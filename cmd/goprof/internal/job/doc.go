// Package job loads the trace files of one gorun --profile job and lines
// them up: every rank's events on rank 0's clock, with one string table
// for the job, each message matched with its receive and each collective
// call with the same call on the other ranks. goprof's reports and
// pictures are made from a Job.
package job
