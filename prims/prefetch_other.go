//go:build !amd64 && !arm64

package prims

import "unsafe"

// prefetchWrite does nothing here (prefetch_asm.go).
func prefetchWrite(p unsafe.Pointer) {}
