// Package spmd is what a gorun program imports: Init joins the job and
// returns the World, whose communicators send and receive messages between
// ranks with MPI's semantics.
//
//	w, err := spmd.Init(ctx)
//	if err != nil { ... }
//	defer w.Close()
//	fmt.Printf("rank %d of %d\n", w.Rank(), w.Size())
//
// Run without gorun, Init returns a world of one rank (MPI's singleton), so
// every program also runs alone.
//
// Messages from one source with one tag on one communicator arrive in the
// order they were sent. Every blocking call takes a context first; a call
// waiting on a rank that died returns an error wrapping ErrPeerLost that
// names the rank.
//
// Split makes communicators of some of a communicator's ranks (MPI's
// MPI_Comm_split), whose traffic never mixes with any other's, and Dup one
// of all of them (MPI_Comm_dup), for a library or a stream of collectives
// of its own; Free lets go of one, and of the shared memory and state
// that collectives keep on it, once a rank is done with it.
package spmd
