//go:build (amd64 || arm64) && !race

package release

import "sync/atomic"

// Plain reports whether the stores are release stores, not sync/atomic's.
const Plain = true

// Store32 stores v in *word with release semantics.
//
//go:noescape
func Store32(word *atomic.Uint32, v uint32)

// Store64 stores v in *word with release semantics.
//
//go:noescape
func Store64(word *atomic.Uint64, v uint64)
