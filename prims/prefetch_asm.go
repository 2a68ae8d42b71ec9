//go:build amd64 || arm64

package prims

import "unsafe"

// prefetchWrite asks the core for the cache line at p in a state it may
// write (PREFETCHW; PRFM PSTL1KEEP), taking it from the other cores' caches
// ahead of the store that needs it. It only hints: it neither faults nor
// changes memory.
//
//go:noescape
func prefetchWrite(p unsafe.Pointer)
