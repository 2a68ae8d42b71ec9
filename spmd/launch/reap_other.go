//go:build !linux

package launch

import "os"

// Subreap does nothing where the kernel has no child subreapers.
func Subreap() error { return nil }

// KillOrphans does nothing where Subreap does nothing: orphans go to init.
func KillOrphans() int { return 0 }

func reapOrphans(map[int]bool) {}

func orphanExits() (<-chan os.Signal, func()) { return nil, func() {} }
