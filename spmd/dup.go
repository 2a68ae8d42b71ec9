package spmd

import "context"

// Dup returns a communicator with the same ranks as c, in the same order,
// whose traffic never mixes with c's or any other communicator's
// (MPI_Comm_dup): a library that talks on its own duplicate cannot take a
// message meant for the program, nor the program one of the library's.
// Every rank of c must call Dup, in the same order as its other collective
// calls on c; a rank must not duplicate or split one communicator from
// several goroutines at once, while those of different communicators may
// run at once (Dup is a Split with one color).
//
// The duplicate inherits c's values, as Split's communicators do (topo's
// fitted model holds for the same ranks). What is kept per communicator
// is its own: its id, and so its collective context, its shared memory
// (Shared) and the values that packages check belong to it (prims's
// state, with its hierarchical sub-communicators and its queue of
// non-blocking collectives). Free the duplicate when done with it;
// freeing it leaves c alone, and freeing c leaves the duplicate alone.
func (c *Comm) Dup(ctx context.Context) (*Comm, error) {
	return c.split(ctx, "dup", 0, c.rank)
}
