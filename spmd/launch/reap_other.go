//go:build !linux

package launch

// Subreap does nothing where the kernel has no child subreapers.
func Subreap() error { return nil }

// KillOrphans does nothing where Subreap does nothing: orphans go to init.
func KillOrphans() int { return 0 }

func reapOrphans(map[int]bool) {}
