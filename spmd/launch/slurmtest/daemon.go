package slurmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a daemon has between SIGTERM and SIGKILL.
const stopGrace = 3 * time.Second

// daemon is one process the rig started: munged, slurmctld or a slurmd. Its
// waiter goroutine is owned by the Cluster, which waits for done in Close.
type daemon struct {
	name string // "munged", "slurmctld", "slurmd n1"
	cmd  *exec.Cmd
	log  string // where its own log goes
	out  *os.File
	done chan struct{} // closed when the process has been reaped
	err  error         // Wait's result, set before done closes
}

// start starts argv in the foreground as one of the rig's daemons, with the
// rig's environment and its output in Dir/<file>.out. It dies with the
// test binary (Pdeathsig).
func (c *Cluster) start(name, log string, argv ...string) (*daemon, error) {
	path, err := lookPath(argv[0])
	if err != nil {
		return nil, err
	}
	outPath := filepath.Join(c.Dir, strings.ReplaceAll(name, " ", "-")+".out")
	out, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	d := &daemon{name: name, log: log, out: out, done: make(chan struct{})}
	d.cmd = exec.Command(path, argv[1:]...)
	d.cmd.Env = c.Env()
	d.cmd.Dir = c.Dir
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL, // do not outlive a killed test binary
	}
	if err := d.cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c.mu.Lock()
	c.daemons = append(c.daemons, d)
	c.mu.Unlock()
	go func() {
		d.err = d.cmd.Wait()
		out.Close()
		close(d.done)
	}()
	return d, nil
}

// exited reports whether the daemon has ended.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// failure describes a daemon that ended, with the end of its logs.
func (d *daemon) failure() error {
	return fmt.Errorf("%s exited: %v%s%s", d.name, d.err, tail(d.out.Name()), tail(d.log))
}

// stop ends the daemon: SIGTERM, then SIGKILL if it has not gone in
// stopGrace.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		return
	case <-time.After(stopGrace):
	}
	_ = d.cmd.Process.Kill()
	<-d.done
}

// tail returns the end of a log file for an error message.
func tail(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n" + path + ":\n" + string(b)
}
