// Package rendezvous is the job's central rendezvous: the launcher runs a
// Server, every rank registers its record with it once (Register) and
// gets the whole table back once every rank has, as PMIx's fence and
// torch's TCPStore do. One connection and one table per rank, against the
// gossip's state exchanges: joining through memberlist cost the seed a
// push-pull of every member known for each join and pull, O(N²) bytes,
// and 256 ranks on 2 cores never converged.
//
// The wire is TCP. A rank proves it belongs to the job with an HMAC of a
// nonce under the job's secret; the server answers with the table, with
// the ranks still missing when the rank asks (its Init deadline), or with
// an error (a rank registered twice, another job, a different size).
package rendezvous
