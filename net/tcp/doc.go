// Package tcp is gorun's TCP data plane: it moves the framed messages of one
// job between ranks on different hosts and implements transport.Transport.
//
// Each rank opens a Listener before the rendezvous, publishes its Addr, and
// builds its Transport with New once every rank's address is known:
//
//	l, err := tcp.Listen("10.0.0.7:0")
//	// ... publish l.Addr(), learn addrs of all ranks ...
//	t := tcp.New(l, rank, addrs, secret, tcp.WithLogger(logger))
//	err = t.Start(handler)
//	defer t.Close()
//
// # Connections
//
// A rank holds at most one connection per peer, opened lazily by the first
// Send or Watch to that peer. Both ranks of a pair may dial each other at the
// same moment; the acceptor answers every authenticated dial with accept or
// reject, and while both dials are in flight the one dialed by the lower rank
// wins, so exactly one connection survives and no message is lost. A
// connection carries messages only after its accept.
//
// Before the accept both sides prove that they hold the per-job secret:
// each sends a fresh random nonce, and each answers with an HMAC-SHA256 over
// both nonces and both ranks (with distinct labels for the two directions).
// The secret itself never crosses the wire. A connection that fails this is
// closed and logged with its remote address; it never reaches the Handler.
//
// # Frames
//
// Every message is a 20-byte little-endian header (magic and version,
// communicator, tag, payload length) followed by the payload. A receiver
// reads into a 64 KiB buffer, so small messages cost few syscalls, and
// reads large payloads straight into the slice that the Handler's Buffer
// returned. A malformed header, or a length above MaxPayload, drops the
// peer.
//
// # Sending
//
// All writes are non-blocking writevs of header and payload, without
// copying the payload. A message that finds nothing queued for its peer is
// written at once on the sender's goroutine; what the socket does not take
// waits, in order, in the peer's queue. Send (blocking) waits for its
// frame to be written; StartSend (transport.Starter) returns at once and
// tells its Done later, so spmd's Isend needs no goroutine; TrySend
// (transport.TrySender) takes messages up to 64 KiB only when it can write
// them now, and copies what the socket leaves. Queued frames are written
// by whoever polls (below), or else by the peer's writer goroutine, which
// waits in Go's netpoller for the socket to have room (see outq.go).
//
// # Receiving
//
// Each connection has a reader goroutine that waits for data in Go's
// netpoller. Transport also implements transport.Poller: a goroutine
// waiting for a message (spmd's Request.Wait) can read the sockets, and
// write the queued frames, itself with Poll, without waiting, and so
// receive the message, and send the next, with no hand-off between
// goroutines. While anyone polls, the reader and writer goroutines leave
// the sockets alone, and the last EndPoll reads what is left and hands the
// queued frames back, so nothing waits for a wake-up that will not come.
// Either way one goroutine at a time reads a connection, and the Handler
// sees each peer's messages in order. Poll counts every byte moved as
// progress; PollLimit (transport.PollLimiter) tells spmd not to poll for
// messages above 64 KiB on a host with more ranks than cores.
//
// # Loss
//
// End of stream, a reset, a read or write error, a send cancelled (or a
// started send withdrawn) half-way through its frame, or a dial that keeps failing for the dial timeout all
// report the peer through Handler.Lost, once, with a *transport.PeerError
// that wraps transport.ErrPeerLost; later Sends to that peer return the same
// error. Messages a peer sent before it closed cleanly are all delivered
// before its loss is reported. Close half-closes every connection, so that
// peers read everything already sent, and reports the remaining peers lost
// with transport.ErrClosed.
package tcp
