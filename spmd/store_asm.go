//go:build amd64 || arm64

package spmd

import "sync/atomic"

// storeRelease stores v in *word with release semantics: no load or store
// before it is seen after it.
//
//go:noescape
func storeRelease(word *atomic.Uint32, v uint32)
