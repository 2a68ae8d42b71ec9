//go:build !amd64 && !arm64

package spmd

import "sync/atomic"

// storeRelease stores v in *word: sequentially consistent here, which is
// at least a release store.
func storeRelease(word *atomic.Uint32, v uint32) { word.Store(v) }
