// Package shm is gorun's same-host data plane: the ranks of one job that
// share a host move their framed messages through shared memory instead of
// TCP. It implements transport.Transport for the peers on the rank's host;
// spmd routes the other peers to net/tcp.
//
// Each rank builds its Transport with New once it knows which ranks share
// its host; New creates the rank's segment at once, and Start attaches to
// the peers' segments, waiting for those not created yet:
//
//	t, err := shm.New(jobID, rank, localRanks, worldSize, secret)
//	err = t.Start(handler)
//	defer t.Close()
//
// and the launcher removes whatever a crashed job left behind:
//
//	defer shm.Cleanup(jobID)
//
// # Segments
//
// A rank's segment is its inbox: a file /dev/shm/gorun-<jobid>-r<rank>-<tag>,
// mode 0600 (with its doorbell, the FIFO <name>.bell; see Waiting), holding
// one single-producer single-consumer ring (of
// DefaultRingSize bytes) per other rank of the host. The owner creates it
// under a temporary name and renames it into place; from Start on, a rank
// maps every peer's segment as it appears (for at most the attach timeout),
// records its pid in its ring and counts itself in. The owner unlinks the
// file as soon as every peer has mapped it, so a running job holds no names
// in /dev/shm; Close removes it if that never happened, and Cleanup, which
// the launcher calls after the job however it ended, removes every file of
// the job, so that nothing is left even after a crash.
//
// Only ranks of the same job attach: the tag in the name is an HMAC of the
// job secret, the header carries an HMAC of the secret over the job, the
// owner's rank, the ring size and the host's ranks, and the file must be a
// regular file of this user with mode 0600. A segment that fails these is
// refused and logged, and its rank reported lost.
//
// # Rings and frames
//
// A frame is a 24-byte header (magic and version, flags, communicator,
// tag, length) followed by the payload, padded to 8 bytes and wrapping
// around the ring's end. Its first 8 bytes are a marker word that the
// sender stores last, and the sender zeroes the word after each frame
// before publishing it: the receiver finds a new frame by the marker at
// its head, in the cache line that carries the message, rather than by the
// ring's tail, and the sender reads the receiver's head only when it runs
// short of room. A message that fits in a quarter of the ring is written
// in one piece; a larger one, of any size up to MaxPayload, streams
// through the ring in pieces of at least a quarter, published by the tail,
// and the receiver copies each piece straight from the ring into the slice
// the Handler's Buffer returned: one copy in, one copy out, no
// whole-message copy. A frame with a bad header, or ring positions that
// cannot be, drops the peer.
//
// # Single copy
//
// A message of at least DefaultSingleCopy bytes (WithSingleCopy) travels
// as a descriptor instead: the receiver reads the payload straight from
// the sender's memory into the posted buffer with process_vm_readv, and
// the sender's Send returns once it has. Through StartSend (a
// transport.Starter) the sender need not wait: spmd's Isend starts the
// send, later sends to that peer go out at once, and the request completes
// when the receiver has taken the payload, noticed by whichever goroutine
// polls next. Where the kernel refuses such reads (a Yama ptrace policy),
// the receiver says so in the ring and the sender streams instead. See
// singlecopy.go. Memory that single-copy sends offer a second time is
// collapsed into transparent huge pages (WithHugePages, huge.go), which
// the kernel's copy reads faster.
//
// # Waiting
//
// One goroutine per rank polls all its incoming rings. When they are all
// empty it spins (polls with runtime.Gosched between, DefaultSpin times and
// for at least 100 us, or OversubscribedSpin times when the host has more
// ranks than cores), then naps for up to 5 ms on a futex word in its
// segment, which a sender bumps and wakes after publishing while the
// receiver naps, and then sleeps on the segment's doorbell, a FIFO beside
// it (mode 0600, removed with it) that a sender writes a byte to. The nap
// wakes within microseconds; the doorbell puts the goroutine in the Go
// runtime's poller, where a blocked goroutine holds no processor: a long
// futex wait made the runtime's sysmon take its processor back and then
// poll every 20 us, which woke an idle rank hundreds of times a second.
// A sender that finds the ring full waits on a futex word of the ring
// that the receiver wakes after freeing space. The futexes are shared (no
// FUTEX_PRIVATE_FLAG), so the waker may be another process. Sends and
// deliveries allocate nothing.
//
// A goroutine waiting for a message may poll the rings itself
// (transport.Poller): while any does, the receiver sleeps and senders skip
// the doorbell. The last poller of a session that delivered something
// stays registered for 50-100 us (lingerFor to twice that) after EndPoll,
// so that a rank in a loop of exchanges, which polls again a microsecond
// later, is not sent a wake-up meanwhile; when the linger ends with nobody
// polling, what came in is delivered then.
//
// # Loss
//
// A sleeping side wakes at least every 150 ms and then checks that its
// peers' processes exist, through a pidfd that turns readable when the
// process exits (even before its parent reaps it; kill(pid, 0) where
// pidfds are missing), so a SIGKILLed peer is reported within about 150 ms,
// whether we wait for its messages or for room in its ring. From a peer's
// attach on (unless it is this process), a goroutine waits for its pidfd
// in the Go runtime's poller and wakes the receiver when the process exits
// (within milliseconds); with every peer so watched, the receiver asleep
// on its doorbell checks only every 5 s, and an idle rank hardly ever
// wakes. Close marks
// this rank's rings closed and wakes its peers, which see the clean close
// at once. Either way, every message the peer completed before is
// delivered first; a half-written one is dropped (Deliver is not called).
// A loss reaches the Handler once, as a *transport.PeerError that names the
// rank and wraps transport.ErrPeerLost; later Sends return it. A Send
// cancelled half-way through a frame breaks the ring, so both sides drop
// the link, as net/tcp does.
package shm
