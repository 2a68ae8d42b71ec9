package spmd

import (
	"errors"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// ErrPeerLost is wrapped by every error caused by a rank that died, closed
// its world, or became unreachable. The error names the rank; use errors.As
// with *PeerError to get it.
var ErrPeerLost = transport.ErrPeerLost

// ErrClosed is returned by calls on a World that has been closed.
var ErrClosed = transport.ErrClosed

// ErrWithdrawn is wrapped by the error of a receive that matched a large
// message whose sender then took it back (its send's context ended before
// the receiver began to copy it; see Comm.Isend). The link between the
// two ranks stays up.
var ErrWithdrawn = transport.ErrWithdrawn

// ErrTruncated is returned by a receive whose buffer is smaller than the
// message that matched it. The message is consumed.
var ErrTruncated = errors.New("message longer than the receive buffer")

// ErrBadRank is returned for a rank outside 0..Size()-1.
var ErrBadRank = errors.New("rank out of range")

// ErrBadTag is returned for a negative tag or one above MaxTag.
var ErrBadTag = errors.New("tag out of range")

// PeerError names the rank behind a failure; it unwraps to an error that
// wraps ErrPeerLost.
type PeerError = transport.PeerError

// MaxTag is the largest tag a program may use.
const MaxTag = 1<<31 - 1
