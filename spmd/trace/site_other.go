//go:build !amd64

package trace

import "runtime"

// callers fills pcs with the return addresses of the calling function's
// callers and returns how many it found.
func callers(pcs []uintptr) int { return runtime.Callers(3, pcs) }
