// Package transport is the contract between spmd's communicators and the
// data-plane transports that move their bytes: net/tcp, net/shm and net/mem.
//
// spmd owns message matching (communicator, source, tag, MPI's
// non-overtaking rule); a Transport only moves framed messages between the
// ranks of one job and reports peers it has lost. The types live in their own
// package because both sides must name them and spmd imports the transports
// to build a World.
package transport
