package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/hosts"
)

// runRemote runs a job with ranks on other hosts: it picks the address
// that faces them, opens the seed there, starts one agent per host through
// the spawn tree, and supervises the ranks through them.
func (l *Launcher) runRemote(ctx context.Context, cfg *Config, hl *hostList, jobID string, secret []byte,
	out *output, logf func(string, ...any)) (int, bool, error) {
	gorun, err := os.Executable()
	if err != nil {
		return 0, false, fmt.Errorf("finding gorun's own path for the agents: %w", err)
	}
	remote, err := newRemote(hl.mode, cfg.SSHArgs, cfg.LaunchAgent, time.Duration(cfg.ConnectTimeout), gorun)
	if err == nil && hl.mode == ModeSrun {
		err = srunCommand()
	} else if err == nil {
		err = agentCommand(remote.Argv[0], cfg.LaunchAgent)
	}
	if err != nil {
		return 0, false, errorf(ErrUsage, "%v", err)
	}
	targets := hl.targets()
	bind, notice, err := launcherAddr(cfg, remote, targets)
	switch {
	case err != nil && (cfg.Iface != "" || cfg.Net != ""):
		return 0, false, err
	case err != nil:
		out.Logf("%v; the seed listens on 127.0.0.1, which only ranks on this machine reach", err)
		bind = "127.0.0.1"
	case notice != "" && cfg.restart == 0:
		out.Logf("%s", notice)
	}
	logf("the launcher's address facing the hosts is %s", bind)
	seed, err := l.openSeed(ctx, SeedConfig{JobID: jobID, Secret: secret, BindAddr: bind, Verbose: cfg.Verbose, Crowd: 1, Gossip: true}, cfg.Ports, out)
	if err != nil {
		return 0, false, err
	}
	if seed != nil {
		defer seed.Close()
	}
	radix := cfg.SpawnRadix
	if hl.mode == ModeSrun {
		radix = len(targets) // srun fans out itself: no tree of agents
	}
	setup := func(t target) setupMsg {
		return setupMsg{
			Name: t.Name, JobID: jobID, Secret: secret, Remote: remote, Radix: radix,
			Seed: bind, Iface: cfg.Iface, Net: cfg.Net, Ports: cfg.Ports,
			KillGrace: time.Duration(cfg.KillGrace), Connect: time.Duration(cfg.ConnectTimeout),
			AgentTimeout: time.Duration(cfg.AgentTimeout), Verbose: cfg.Verbose,
		}
	}
	sub, parents := map[int][]target{}, map[int]string{}
	subtreeOf(targets, radix, "", sub, parents)
	c := newCluster(targets, remote, radix, func(t target) setupMsg {
		s := setup(t)
		s.Subtree, s.Parent = sub[t.Index], parents[t.Index]
		return s
	}, out, logf)
	c.sp.preload, c.preloaded = preloads(cfg, gorun, len(targets), logf)
	c.sp.agentTimeout = time.Duration(cfg.AgentTimeout)
	// Agents that ran ranks get time to stop them; agents that never
	// answered (a hung ssh or --launch-agent) are killed at once.
	closeWait := time.Duration(cfg.KillGrace) + 5*time.Second
	defer func() { c.close(closeWait) }()
	wait := connectWait(cfg, radix, len(targets), c.sp.preload != nil)
	if err := c.connect(ctx, targets, wait, time.Duration(cfg.ConnectTimeout)); err != nil {
		closeWait = 0
		if ctx.Err() != nil {
			out.Logf("interrupted while starting the agents; stopping them")
			return 128 + int(syscall.SIGINT), false, nil
		}
		return 0, false, err
	}
	plan, err := l.plan(cfg, hl, jobID, bind, c.agents(), seed, out)
	if err != nil {
		return 0, false, err
	}
	c.wdirSet = cfg.Wdir != ""
	if !c.wdirSet {
		jcfg := *cfg              // not cfg itself: a restart of the job runs this again
		jcfg.Wdir, _ = os.Getwd() // the ranks' directory on every host, if it exists there
		cfg = &jcfg
	}
	j := &job{cfg: cfg, plan: plan, out: out, logf: logf, secret: secret, l: l, starter: c}
	status := j.run(ctx, seed)
	return status, j.failed, nil
}

// preloads lists what to copy to each host before its agent starts (nil:
// nothing) and names, by path here, the programs among them: with
// --preload, gorun and every program; without, the programs gorun built,
// which live in a temp dir of this machine that no other host sees (it
// said "not found", status 127, on each of them).
func preloads(cfg *Config, gorun string, hosts int, logf func(string, ...any)) ([]preloadFile, map[string]string) {
	programs := make([]string, len(cfg.contexts()))
	for i, a := range cfg.contexts() {
		if cfg.Preload || i < len(cfg.built) && cfg.built[i] {
			programs[i] = a.Program
		}
	}
	files, names := preloadPrograms(programs)
	if cfg.Preload {
		return append([]preloadFile{{Name: preloadGorun, Path: gorun}}, files...), names
	}
	if len(files) == 0 {
		return nil, nil
	}
	var built []string
	for _, f := range files {
		built = append(built, filepath.Base(f.Path))
	}
	logf("copying %s, which gorun built on this machine, to a temporary directory on each of the %d other %s, as --preload would (gorun itself is not copied)",
		strings.Join(built, " and "), hosts, plural(hosts, "host"))
	return files, names
}

// connectWait bounds the wait for every agent: the connect timeout per
// level of the spawn tree and connectMargin, so that ssh, given the same
// ConnectTimeout, says first why it failed (with --preload, time for the
// copies too). A connect timeout of 0 is no limit, for ssh too.
func connectWait(cfg *Config, radix, n int, preload bool) time.Duration {
	per := time.Duration(cfg.ConnectTimeout)
	if per <= 0 {
		return 0
	}
	levels := 1
	for reach := radix; reach < n; reach = reach*radix + radix {
		levels++
	}
	extra := connectMargin
	if preload {
		extra += 30 * time.Second
	}
	return time.Duration(levels)*per + extra
}

// connectMargin is how much longer than --connect-timeout gorun waits for
// an agent on one level of the spawn tree (see gorun(1)).
const connectMargin = time.Second

// launcherAddr is the address the seed binds: --iface or --net, else the
// local address that routes to the first remote hosts. An --iface or
// --net that matches nothing here falls back to the route, and notice
// says so: the hosts' networks need not be the launcher's (a login node
// beside the cluster's fabric), and their agents still pick their own
// address by it. Where the route fails too, that is a usage error: a seed
// on 127.0.0.1 made every remote rank wait for it until its init timeout.
func launcherAddr(cfg *Config, remote remote, targets []target) (addr, notice string, err error) {
	if cfg.Iface == "" && cfg.Net == "" {
		addr, _, err = routeToHosts(remote, targets)
		return addr, "", err
	}
	flag := "--net"
	if cfg.Iface != "" {
		flag = "--iface"
	}
	addr, err = pickAddr(cfg.Iface, cfg.Net, "")
	if err == nil && !isLoopback(addr) {
		return addr, "", nil
	}
	routed, host, rerr := routeToHosts(remote, targets)
	if err == nil {
		// A loopback address: right only where the hosts are this
		// machine's own addresses.
		if rerr != nil || isLoopback(routed) {
			return addr, "", nil
		}
		err = loopbackError(cfg.Iface, cfg.Net, addr)
	}
	if rerr != nil {
		return "", "", errorf(ErrUsage, "%v; nor is there a route to the hosts to choose the launcher's address by (%v): give a %s that this machine has", err, rerr, flag)
	}
	return routed, fmt.Sprintf("%v; the launcher listens on %s instead, its address that routes to host %s, as without %s (the hosts still choose theirs by %s)",
		err, routed, host, flag, flag), nil
}

// routeToHosts returns the local address that routes to the first of
// targets that can be resolved, and that host's name.
func routeToHosts(remote remote, targets []target) (ip, host string, err error) {
	var firstErr error
	for i, t := range targets {
		if i == 3 {
			break // the first few decide; the rest are alike
		}
		ip, err := hostIP(remote, t)
		if err == nil {
			ip, err = routeTo(ip)
		}
		if err == nil {
			return ip, t.Name, nil
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("host %s: %w", t.Name, err)
		}
	}
	return "", "", firstErr
}

// agentCommand checks that the command that starts the agents (ssh, or
// --launch-agent's) is there: one that is not is the user's to fix, said
// once before any host is tried, not a lost host (status 255).
func agentCommand(name, launchAgent string) error {
	if _, err := exec.LookPath(name); err == nil {
		return nil
	}
	why := "not found on PATH"
	if strings.Contains(name, "/") {
		why = "no such program, or not executable"
	}
	if launchAgent != "" {
		return fmt.Errorf("--launch-agent %q: %s: %s; give a command that runs a command on a host, as ssh does", launchAgent, name, why)
	}
	return fmt.Errorf("%s: %s; gorun starts its agent on each other host with ssh: install an OpenSSH client, or give --launch-agent", name, why)
}

// srunCommand fails, as agentCommand does for ssh, where srun, which
// starts the agents inside a Slurm allocation, is not on PATH: before any
// host is tried, not as each host's lost agent (status 255).
func srunCommand() error {
	if _, err := exec.LookPath("srun"); err == nil {
		return nil
	}
	return fmt.Errorf("srun: not found on PATH; inside a Slurm allocation (%s set) gorun starts its agent on each node with srun: put Slurm's commands on PATH, or give -H or --hostfile to reach the hosts with ssh",
		hosts.EnvSlurmNodeList)
}
