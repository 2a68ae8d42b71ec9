// Package prims is gorun's collective primitives: Broadcast, Reduce,
// AllReduce, Gather, Scatter, AllGather, ReduceScatter, AllToAll and
// Barrier over a communicator, generic over the element types of
// spmd.Number, each with several algorithms.
//
// Every function is a collective: every rank of the communicator calls it,
// in the same order as its other collective calls on that communicator,
// with matching arguments (the same root, element count, op and options).
// Collectives on one communicator must not be called concurrently from
// several goroutines of a rank (a call that finds another in progress
// fails with ErrConcurrent; non-blocking calls queue instead);
// collectives on different communicators may. Arguments that do not
// match are caught where the algorithm can tell (the Shared algorithms
// compare the collective and length, ErrMismatch and ErrCount); the
// message algorithms, as MPI's, may return without an error, and leave
// messages behind that later calls take: ranks that name different roots
// of a broadcast each send and none receives. With
// GORUN_CHECK_COLLECTIVES=1 (CheckEnv) in the ranks' environment, every
// call that moves data first compares what each rank called
// (collective, size, element type, root, op, forced algorithm) and a
// mismatch fails the call on every rank with ErrMismatch, naming the
// ranks and calls.
// Messages travel on the communicator's collective context
// (spmd.Comm.Collective), so they never match the program's own
// point-to-point receives.
//
// # Algorithms
//
// By default Choose picks the algorithm of each call, the cheapest under
// the algorithms' cost models with the constants that package topo fits
// to the machine, unless the decision table that gorun --tune measured
// for the communicator's hosts (Tune, GORUN_TUNE_FILE) says otherwise, or
// GORUN_ALGO does; WithAlgo forces one. The algorithms and the collectives they implement
// (Algos):
//
//	ring          Broadcast (pipelined chain), Reduce (reduce-scatter, then
//	              gather), AllReduce (segmented reduce-scatter + allgather),
//	              AllGather, ReduceScatter
//	tree          binomial tree: Broadcast, Reduce, Gather, Scatter, Barrier,
//	              AllReduce (reduce, then broadcast)
//	recdbl        recursive doubling: AllReduce, AllGather, Barrier
//	              (dissemination)
//	rabenseifner  recursive-halving reduce-scatter, then recursive-doubling
//	              allgather: AllReduce, Reduce, ReduceScatter
//	hier          inside each host, across one leader per host, inside again:
//	              Broadcast, Reduce, AllReduce, AllGather
//	linear        the root talks to every rank, or every pair talks: Reduce,
//	              Broadcast, Gather, Scatter, AllGather, ReduceScatter,
//	              AllToAll, AllReduce (every rank to rank 0, and back)
//	shared        ranks of one host, through memory they share instead of
//	              messages: every rank publishes its part and reads the
//	              others': AllReduce, Broadcast, AllGather, ReduceScatter,
//	              AllToAll, Barrier (on ranks that cannot share memory it
//	              runs recdbl, tree for Broadcast, ring for ReduceScatter
//	              or linear for AllToAll instead, and says so in the trace;
//	              SharedMemory says whether, and why)
//
// Each algorithm carries its cost model beside its code (ringAllReduceCost
// beside ringAllReduce, and so on): its rounds priced with the constants
// that package topo measures (topo.Model: alpha, beta and gamma per link
// class, cores, wake-ups) and the building blocks it provides, and with
// the very constants that lay out the algorithm's segments and shared
// memory. Cheapest adds them up for any machine; Choose asks it for the
// communicator's own, and Report prints its answers as gorun --topo does.
//
// Rank counts that are not powers of two are folded in the standard way:
// the first 2r ranks (r = p - 2^floor(lg p)) pair up and one of each pair
// sits out the power-of-two core. Asking for an algorithm that does not
// implement a collective fails with ErrAlgo.
//
// # Buffers
//
// AllReduce works in place; AllReduceTo, Reduce, ReduceScatter, Gather,
// Scatter, AllGather and AllToAll take a send and a receive buffer. Gather,
// Scatter, AllGather and AllToAll move equal blocks: rank i's block is
// recv[i*k:(i+1)*k] (or send's, for Scatter and AllToAll). ReduceScatter
// cuts a vector of any length n into Size blocks as Block says: the first
// n%p ranks get one element more. Buffers are sent and received in place
// (spmd.Bytes), without copies; the temporaries an algorithm needs come
// from a scratch buffer cached per communicator.
//
// # Non-blocking collectives
//
// IAllReduce, IReduceScatter, IAllGather and IBroadcast take the
// arguments and options of their blocking namesakes, queue the call and
// return a Request at once; the collective runs in the background while
// the caller computes, and Request.Wait, Test or Done say when it has
// completed (MPI-3's MPI_Iallreduce and the like). Until then its buffers
// belong to it: they are worked on in place, never copied.
//
// The calls on a communicator run in the order they are made, on every
// rank: each communicator has an executor goroutine that runs its queue
// one call after the other, through the blocking calls' own code (the
// same algorithm choice, the same failures), and exits when the queue is
// empty. A blocking collective on a communicator with non-blocking ones
// in flight waits for them, then runs; with nothing queued it costs what
// it did. One goroutine issues on a communicator (non-blocking and
// blocking calls alike, in the order all ranks use); any goroutine may
// wait. A call of no elements or on one rank completes at once. A failure
// fails the request it happened in, which breaks the communicator as a
// blocking call's does: the requests queued behind it fail at once with
// the same reason.
//
// Communicators run their queues independently: a driver that overlaps
// two streams of collectives gives each its own communicator
// (spmd.Comm.Dup). spmd's own collectives on a communicator (Split, Dup,
// Barrier) do not wait for its queue; a Split or Dup must not overlap a
// queued call that makes the communicator's first hierarchical call,
// which splits it too.
//
// # Failures
//
// Every call takes a context and returns an error that names the
// collective, the algorithm and the communicator. A rank whose call fails
// (a lost peer, its context ended) marks the communicator broken and
// tells the other ranks, whose pending and later calls on it then fail
// too, with an error wrapping spmd.ErrPeerLost that names the lost rank,
// or ErrAborted: no rank waits for one that has given up. A rank that
// merely finishes and closes its world breaks nothing. After a failed call
// the contents of the receive buffers are undefined.
//
// Calls whose arguments do not match fail where the algorithm can tell:
// with ErrCount when a message, or a Shared algorithm's part, comes from
// a rank that passed another length, and with ErrMismatch when a Shared
// algorithm finds a rank in another collective. Where the ranks' lengths
// lead them to different algorithms, or to different rings of a Shared
// one, they wait for each other as mismatched calls do in MPI, until a
// rank exits or the context ends.
//
// # Hierarchical algorithms
//
// The first hierarchical call on a communicator splits it (spmd.Comm.Split)
// into one communicator per host and one of the host leaders, and caches
// them. Those splits may run while other communicators split theirs, from
// other goroutines or from the queues of non-blocking collectives.
package prims
