package launch

import (
	"os"
	"strconv"
)

// guardPrefix starts the name of every job's cgroup; RunGuard removes no
// other.
const guardPrefix = "gorun-"

// openCgroup makes the cgroup of job jobID for the ranks this process
// starts (gorun-JOBID-PID: an agent on the launcher's machine, as in the
// rig tests, makes its own), with its guard; or returns nil where there
// can be none, and the ranks are held as subreaped descendants (Subreap).
// logf gets one line either way (gorun's --verbose).
func openCgroup(jobID string, guard []string, logf func(string, ...any)) *cgroup {
	c, err := newCgroup(guardPrefix+jobID+"-"+strconv.Itoa(os.Getpid()), guard, logf)
	if err != nil {
		logf("no cgroup for the ranks on %s (%v): they are held as gorun's descendants", hostname(), err)
		return nil
	}
	logf("the ranks on %s run in cgroup %s", hostname(), c.dir)
	return c
}
