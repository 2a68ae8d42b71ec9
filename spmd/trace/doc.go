// Package trace is the one trace point that every send, receive and
// collective of a rank passes, the regions a program marks
// (trace.Region(ctx, "forward")), and the format of the files goprof
// reads.
//
// With profiling off (no gorun --profile) the Recorder is nil, and every
// call on a nil *Recorder returns at once: a nil check. With profiling on
// each rank streams its events to DIR/rank.N.trace as it runs, through a
// buffer of a few tens of KiB, so that a long job holds no more than that,
// written when it is full and every 20 ms: a rank that crashes or is
// killed loses at most its last 20 ms of events, and its file lacks the
// end record, which goprof reports.
//
// # File format (version 2)
//
// A file is the magic "GORUNTRC", then records. A record is a kind byte,
// a uvarint payload length and the payload, so a decoder skips the kinds it
// does not know. Integers in payloads are uvarints; signed ones are
// zigzag varints. The kinds:
//
//   - header: JSON (Header): version, rank, size, job, host, pid, start,
//     program and, after a restart (gorun --max-restarts), which start of
//     the job wrote the file.
//   - string: id, bytes. Names, algorithms, tracks and call sites are
//     written once and referred to by id; id 0 is the empty string.
//   - comm: id, size, the world ranks of its members in order.
//   - clock: the rank's offset to rank 0's clock (varint ns: add it to
//     this rank's times) and the round trip it was measured with.
//   - event: kind, flags, track, start (varint delta from the previous
//     event's start), duration, then the kind's fields: for a send,
//     receive or wait the communicator, peer, tag, bytes, call site and
//     name (a wait's: "send" or "recv"); for a collective the
//     communicator, operation, algorithm, bytes, index on its
//     communicator, predicted time and call site; for a region its name;
//     for a memory sample the heap's bytes.
//   - end: the number of events written and the time of Close.
//
// Times are nanoseconds on the rank's own monotonic clock, counted from
// the recorder's start; the clock record aligns them with rank 0's.
package trace
