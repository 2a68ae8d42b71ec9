//go:build !linux

package launch

import (
	"errors"
	"io"
	"syscall"
)

// cgroup is a job's cgroup; there is none off Linux.
type cgroup struct{ dir string }

func newCgroup(string, []string, func(string, ...any)) (*cgroup, error) {
	return nil, errors.New("no cgroups off Linux")
}

func (c *cgroup) on() bool                      { return false }
func (c *cgroup) procAttr(*syscall.SysProcAttr) {}
func (c *cgroup) failed(error)                  {}
func (c *cgroup) Close() error                  { return nil }

// RunGuard is gorun's hidden guard mode, for a job's cgroup; off Linux
// there is none to guard, and it only waits for the end of in.
func RunGuard(dir string, in io.Reader, log io.Writer) int {
	io.Copy(io.Discard, in)
	return 0
}
