// Package transporttest holds test support for implementations of
// transport.Transport: Recorder, a fake transport.Handler that records what
// a transport delivers and reports lost, and checks that the transport keeps
// the Handler's calling rules.
//
// It serves the test suites of net/tcp and net/shm, as raft's rafttest
// serves raft.
package transporttest
