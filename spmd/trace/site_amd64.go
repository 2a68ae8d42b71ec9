package trace

// callers fills pcs with the return addresses of the calling function's
// callers, walking the frame pointers as the runtime's execution tracer
// does, and returns how many it found.
//
//go:noescape
func callers(pcs []uintptr) int
