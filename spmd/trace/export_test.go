package trace

// Callers is the call-stack walk behind Recorder.Site: on amd64 it follows
// the frame pointers, elsewhere it is runtime.Callers.
var Callers = callers

// The package's tuning constants, for tests that check them.
const (
	FlushAt    = flushAt
	FlushEvery = flushEvery
	HeapEvery  = heapEvery
	MaxRecord  = maxRecord
	SiteDepth  = siteDepth
)

// SiteVia calls r.Site depth+1 frames down inside package trace, as spmd
// and prims call it from theirs: Site must look past those frames.
func SiteVia(r *Recorder, depth int) uint32 {
	if depth > 0 {
		return SiteVia(r, depth-1)
	}
	return r.Site()
}
