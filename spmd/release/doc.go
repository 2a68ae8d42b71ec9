// Package release stores words of memory with release semantics: no load
// or store before the store is seen after it, by any thread or process
// that sees the store. That is what a reader who waits for the word needs,
// and on amd64 it is a plain MOV (every store is a release store there),
// where Go's sync/atomic stores are sequentially consistent: an XCHG, which
// waits for every store before it to reach the cache, including those to
// lines another core holds. On arm64 it is STLR.
//
// A release store does not order itself before the loads after it. Code
// that stores a word and then loads another that a second party stores
// before loading the first (a waiter's "I am going to sleep" against a
// publisher's "there is something new") needs a fence on both sides, or
// an asymmetric one (membarrier), as spmd.PublishShared does.
//
// Under the race detector, which does not see stores made in assembly,
// and on other architectures, the stores are sync/atomic's.
package release
