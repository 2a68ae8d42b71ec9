// Package spmdtest runs the ranks of a test job as goroutines of one test,
// over the in-process transport (net/mem), real loopback TCP connections
// (net/tcp) or shared memory (net/shm), the way raft has rafttest.
package spmdtest
