//go:build !(amd64 || arm64) || race

package release

import "sync/atomic"

// Plain reports whether the stores are release stores, not sync/atomic's.
const Plain = false

// Store32 stores v in *word: sequentially consistent here, which is at
// least a release store.
func Store32(word *atomic.Uint32, v uint32) { word.Store(v) }

// Store64 stores v in *word: sequentially consistent here, which is at
// least a release store.
func Store64(word *atomic.Uint64, v uint64) { word.Store(v) }
