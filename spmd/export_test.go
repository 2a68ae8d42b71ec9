package spmd

import "time"

// SetSharedNap sets how long WaitShared sleeps between looks at its context
// and its peer, and returns what restores it.
func SetSharedNap(d time.Duration) (restore func()) {
	old := sharedNap
	sharedNap = d
	return func() { sharedNap = old }
}
