//go:build !linux

package launch

import "io"

// closedPipe reports whether w's reader has gone; only on Linux.
func closedPipe(io.Writer) bool { return false }
