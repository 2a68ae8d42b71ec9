//go:build linux

package delayline

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// goneWait bounds how long Close waits for a device to go: a process
// forked in the meantime holds the TUN descriptor until it execs.
const goneWait = 2 * time.Second

// openTun creates TUN device name, without packet information, in network
// namespace ns and returns its non-blocking descriptor. The device lives
// as long as the descriptor.
func openTun(ns, name string) (int, error) {
	fd := -1
	err := inNetns(ns, func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(name)
		if err == nil {
			ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
			err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
		}
		if err != nil {
			unix.Close(fd)
			fd = -1
			return fmt.Errorf("creating TUN device %s (is one left from a line not closed?): %w", name, err)
		}
		return nil
	})
	if err != nil {
		return -1, fmt.Errorf("delayline: netns %s: %w", ns, err)
	}
	return fd, nil
}

// inNetns runs f on an OS thread that has joined network namespace ns,
// and waits for it. The thread goes back to this process's namespace
// after; should it fail to, it ends instead of serving other goroutines in
// the wrong namespace.
func inNetns(ns string, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open(filepath.Join("/run/netns", ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("setns: %w", err)
			return
		}
		ferr := f()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
			// Left locked, the thread ends with this goroutine.
			done <- fmt.Errorf("returning from the namespace: %w (after %v)", err, ferr)
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// ip runs the ip command and returns its error with its output.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("delayline: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// awaitGone waits, boundedly, until namespace ns has no device name.
func awaitGone(ns, name string) error {
	deadline := time.Now().Add(goneWait)
	for {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", "dev", name).CombinedOutput()
		if err != nil {
			return nil // no such device, or no such namespace
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("device %s still in netns %s: %s", name, ns, bytes.TrimSpace(out))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
