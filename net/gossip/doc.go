// Package gossip is the job's membership and rendezvous, on
// hashicorp/memberlist.
//
// The launcher opens a Seed (rank -1) and passes its address to the ranks
// in GORUN_SEEDS. Each rank calls Join with its Member record (rank, host
// id, data-plane address, pid), which travels as memberlist node metadata;
// Join returns once every rank 0..size-1 is known, with the table sorted by
// rank. On timeout the error (a *MissingError, errors.Is ErrTimeout) names
// the ranks that never arrived; every rank computes the same list.
//
// # Security
//
// The gossip of a job is encrypted with a key derived from the job's secret
// (HMAC-SHA256(secret, "gorun gossip key"), AES-256-GCM) and labelled with
// the job id; memberlist drops packets and streams without both, so a node
// of another job, or without the secret, never becomes a member. Member
// metadata is decoded defensively, and a node whose name does not match its
// rank ("r3" for rank 3, "seed-..." for seeds) is refused. Two processes
// claiming one rank make Join and Seed.Wait fail with ErrDuplicateRank.
//
// # Timing
//
// The memberlist timers are tuned for a job on one machine or one LAN (see
// config.go): 10ms gossip ticks make 8 ranks converge on loopback in a few
// ms (BenchmarkJoin8), and 200ms probes with a short suspicion make a dead
// rank reported through Config.OnLost about one second after it died. A
// rank that closes its Node is reported promptly as "left"; one that stops
// answering as "failed". OnLost runs on a goroutine the Node owns, never
// under a memberlist lock, so it may call any method, Close included.
//
// Joining needs a seed only to get in: ranks then gossip among themselves,
// so a job survives the loss of its seed, and several seeds may be given.
package gossip
