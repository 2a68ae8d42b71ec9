package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/net/shm"
)

// Seed is where the launcher meets the ranks: the rendezvous every rank
// registers with (GORUN_RENDEZVOUS) and, for a job across hosts, the
// gossip node that its ranks join to watch each other (GORUN_SEEDS).
type Seed interface {
	Addr() string       // the gossip seed's; "" without one
	Rendezvous() string // the rendezvous's
	// Wait blocks until ranks 0..size-1 have all registered.
	Wait(ctx context.Context, size int) error
	// Watch blocks until every rank has registered (nil) or the first
	// rank that registered would give up waiting; then it returns the
	// ranks still missing.
	Watch(ctx context.Context) ([]int, error)
	Close() error
}

// SeedConfig is what a seedOpener gets to open the job's seed.
type SeedConfig struct {
	JobID    string
	Secret   []byte
	BindAddr string
	Ports    contract.PortRange // the seed's port comes from here; zero: any
	Verbose  bool
	Logf     func(format string, args ...any) // gorun's log, one line per call
	Crowd    int                              // ranks per core on the seed's host (gossip.Config.Crowd)
	// Gossip opens the gossip seed beside the rendezvous. Only the ranks
	// of a job across hosts join the gossip (spmd.Init); for a job on
	// this machine a seed would only tick: memberlist's timers woke the
	// launcher about 300 times a second, each time taking a core from a
	// rank where every core runs one.
	Gossip bool
}

// seedOpener opens the gossip seed of a job. cmd/gorun wires net/gossip.
type seedOpener func(ctx context.Context, cfg SeedConfig) (Seed, error)

// Launcher runs jobs. Set the fields, then call Run; a Launcher runs one job
// at a time.
type Launcher struct {
	Stdin          *os.File  // gorun's stdin, forwarded per Config.Stdin; nil: none
	Stdout, Stderr io.Writer // where rank output and gorun's messages go
	// Signals delivers the signals sent to gorun: SIGINT, SIGTERM and SIGHUP
	// stop the job (a second one kills it), SIGUSR1 and SIGUSR2 are
	// forwarded to every rank. May be nil.
	Signals  <-chan os.Signal
	starter  starter    // nil: Local{}
	OpenSeed seedOpener // nil: no seed, GORUN_SEEDS unset
	Getenv   func(string) string
	// Guard is the command line of a cgroup guard (RunGuard), to which a
	// job's cgroup directory is appended: gorun sets it to itself with
	// --cgroup-guard. With it, the ranks each job starts on this machine
	// are held in a cgroup v2 of their own where the machine allows
	// (cgroup_linux.go); nil: in none.
	Guard []string

	cgroup *cgroup // the running job's, for its ranks on this machine; nil: none
	// killAnswer, pingWait and holdSignal replace the constants of those
	// names where set: tests shorten them, or lengthen holdSignal.
	killAnswer, pingWait, holdSignal time.Duration
}

// Run validates cfg, resolves (and if needed builds) the program, plans the
// job and, unless cfg.DryRun, starts every rank and supervises them until
// they have all ended. It returns the job's exit status; err is set, and
// the status meaningless, when the job could not be started (see ExitCode).
func (l *Launcher) Run(ctx context.Context, cfg Config) (int, error) {
	if err := cfg.countApps(); err != nil {
		return 0, err
	}
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	out := newOutput(l.Stdout, l.Stderr)
	out.Tag, out.Timestamp = cfg.TagOutput, cfg.TimestampOutput
	logf := func(format string, args ...any) {}
	if cfg.Verbose {
		logf = out.Verbosef
	}
	progs := make([]program, len(cfg.contexts()))
	for i, a := range cfg.contexts() {
		p, err := resolveProgram(a.Program, cfg.Wdir)
		if err != nil && len(progs) > 1 {
			return 0, fmt.Errorf("program %d of the MPMD job: %w", i+1, err)
		}
		if err != nil {
			return 0, err
		}
		progs[i] = p
	}
	getenv := l.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	hl, err := resolveHosts(&cfg, getenv)
	if err != nil {
		return 0, err
	}
	if hl.note != "" {
		out.Logf("%s", hl.note)
	}
	cfg.apps = cfg.contexts() // an SPMD job's one context, of the ranks now counted
	if err := checkPorts(&cfg, hl); err != nil {
		return 0, err
	}
	if cfg.DryRun {
		for i, p := range progs {
			cfg.apps[i].Program = p.String()
		}
		cfg.Program = cfg.apps[0].Program
		plan, err := l.plan(&cfg, hl, newID(8), "", nil, nil, nil)
		if err != nil {
			return 0, err
		}
		if err := plan.foreseeStarts(hl.local, hostCPUs, runtime.NumCPU()); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(l.Stdout, hl.Map()); err != nil {
			return 0, err
		}
		return 0, plan.Format(l.Stdout)
	}
	// A bad --output-dir or --profile, or a standard input that cannot
	// be read, is the user's to fix, before a build.
	if err := checkStdin(l.Stdin, &cfg); err != nil {
		return 0, err
	}
	if err := prepareDirs(&cfg); err != nil {
		return 0, err
	}
	for i, prog := range progs {
		if prog.Package != "" {
			logf("building %s", prog.Package)
		}
		cleanup, err := prog.Build(ctx)
		if err != nil {
			if status, ok := l.interrupted(ctx); ok {
				out.Logf("stopped while building %s", prog.Package)
				return status, nil
			}
			return 0, err
		}
		defer cleanup()
		cfg.apps[i].Program = prog.Path
		cfg.built = append(cfg.built, prog.Package != "")
	}
	cfg.Program = cfg.apps[0].Program
	// More ranks than cores: a --bind-to without :overload-allowed refuses
	// the job instead (checkBindings), and this line would say otherwise.
	bind, _ := parseBindPolicy(cfg.BindTo)
	if n := runtime.NumCPU(); hl.mode == modeLocal && cfg.NP > n && !bind.refusesOverload() && !cfg.Quiet {
		out.Logf("%d ranks on %d %s: oversubscribed, ranks will share cores", cfg.NP, n, plural(n, "core"))
	}
	if cfg.Timeout > 0 {
		cfg.deadline = time.Now().Add(time.Duration(cfg.Timeout))
	}
	for {
		status, failed, err := l.start(ctx, &cfg, hl, out, logf)
		out.cutShort() // before keepStartOutput moves the files it names
		if err == nil && failed && cfg.MaxRestarts > 0 && cfg.restart >= cfg.MaxRestarts && ctx.Err() == nil {
			out.Logf("no restart left: the job failed in each of its %d starts (--max-restarts %d)", cfg.restart+1, cfg.MaxRestarts)
		}
		// A job whose output cannot be written any more (writeErr) is not
		// run again: the next start would stop at once for it.
		if err != nil || !failed || cfg.restart >= cfg.MaxRestarts || ctx.Err() != nil || out.writeErr() != nil {
			if err == nil {
				status = out.settle(status)
			}
			return status, err
		}
		if err := keepStartOutput(cfg.OutputDir, cfg.restart); err != nil {
			out.Logf("--output-dir: keeping start %d's files: %v; the next start writes over them", cfg.restart, err)
		}
		cfg.restart++
		out.Logf("restarting the job after its failure: start %d of at most %d (--max-restarts %d)", cfg.restart+1, cfg.MaxRestarts+1, cfg.MaxRestarts)
	}
}

// start runs the job once, as a new job (id, secret, seed, rendezvous),
// and returns its exit status and whether a rank's failure (or a lost
// host) ended it.
func (l *Launcher) start(ctx context.Context, cfg *Config, hl *hostList, out *output, logf func(string, ...any)) (int, bool, error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	jobID := newID(8)
	if cfg.runID == "" {
		cfg.runID = jobID
	}
	defer shm.Cleanup(jobID) // what ranks that died left in /dev/shm
	logf("job %s: %d %s of %s on %d %s (%s)", jobID, cfg.NP, plural(cfg.NP, "rank"), cfg.Program,
		len(hl.hosts), plural(len(hl.hosts), "host"), hl.source)
	if l.Guard != nil && hl.hasLocal() {
		l.cgroup = openCgroup(jobID, l.Guard, logf)
		defer func() {
			if err := l.cgroup.Close(); err != nil {
				out.Logf("%v", err)
			}
			l.cgroup = nil
		}()
	}
	if hl.remote() {
		return l.runRemote(ctx, cfg, hl, jobID, secret, out, logf)
	}
	if cfg.Iface != "" || cfg.Net != "" {
		// A job on this machine talks over loopback and shared memory,
		// but an interface or network that is not here is a mistake to
		// say, not to ignore.
		if _, err := pickAddr(cfg.Iface, cfg.Net, ""); err != nil {
			return 0, false, errorf(ErrUsage, "%v", err)
		}
	}
	cpus := runtime.NumCPU()
	seed, err := l.openSeed(ctx, SeedConfig{JobID: jobID, Secret: secret, BindAddr: "127.0.0.1", Verbose: cfg.Verbose, Crowd: (cfg.NP + cpus - 1) / cpus}, cfg.Ports, out)
	if err != nil {
		return 0, false, err
	}
	if seed != nil {
		defer seed.Close()
	}
	plan, err := l.plan(cfg, hl, jobID, "", nil, seed, out)
	if err != nil {
		return 0, false, err
	}
	j := &job{cfg: cfg, plan: plan, out: out, logf: logf, secret: secret, l: l}
	status := j.run(ctx, seed)
	return status, j.failed, nil
}

// plan plans the job on hl; with out it says there when it sets
// OMP_NUM_THREADS, and when the starters will set GOMAXPROCS. bind is the
// launcher's address facing the hosts ("" for a job on this machine only);
// agents holds, for each remote host, what its agent said when ready.
func (l *Launcher) plan(cfg *Config, hl *hostList, jobID, bind string, agents map[string]readyMsg, seed Seed, out *output) (*jobPlan, error) {
	pr, _ := contract.ParsePortRange(cfg.Ports)
	job := jobInfo{
		ID:         jobID,
		MasterAddr: "127.0.0.1",
		Getenv:     l.Getenv,
		Ports:      cfg.Ports,
		Slurm:      hl.mode == ModeSrun,
	}
	if !cfg.DryRun {
		job.MasterPort = freePort(bind, pr)
	}
	if hl.mode == modeLocal {
		job.HostIDs = map[string]string{hl.rankHost[0]: contract.LocalHostID()}
	} else {
		// Names from the host list, not hostnames: hosts may share one.
		job.HostIDs, job.BindAddrs = map[string]string{}, map[string]string{}
		for _, h := range hl.hosts {
			job.HostIDs[h.Name] = h.Name
			if hl.local[h.Name] && bind != "" {
				job.BindAddrs[h.Name] = bind
			}
		}
		// torchrun's MASTER_ADDR is rank 0's host, where such programs
		// open their rendezvous store.
		switch rank0 := hl.rankHost[0]; {
		case agents[rank0].BindAddr != "":
			job.MasterAddr = agents[rank0].BindAddr
		case hl.local[rank0] && bind != "":
			job.MasterAddr = bind
		case !hl.local[rank0]:
			job.MasterAddr = "<address of " + rank0 + ", chosen at launch>"
		}
	}
	if seed != nil {
		if a := seed.Addr(); a != "" {
			job.Seeds = []string{a}
		}
		job.Rendezvous = seed.Rendezvous()
	} else if cfg.DryRun {
		if hl.remote() {
			job.Seeds = []string{"<seed address, chosen at launch>"}
		}
		job.Rendezvous = "<rendezvous address, chosen at launch>"
	}
	plan, err := newPlan(cfg, job, hl.rankHost)
	if err == nil {
		err = checkBindings(plan, hl.local, hostCPUs)
	}
	if err == nil && out != nil && cfg.restart == 0 && !cfg.Quiet {
		notices(plan, cfg, hl, agents, out)
	}
	return plan, err
}

// checkBindings fails where a rank of this machine cannot be bound as
// --bind-to asks, as its start would, before gorun says anything of the
// job or starts any of it (hostCPUs lists this machine's CPUs; another
// host's agent judges its own).
func checkBindings(plan *jobPlan, local map[string]bool, hostCPUs func() ([]cpuInfo, error)) error {
	for _, rp := range plan.Ranks {
		if !local[rp.Host] {
			continue
		}
		// The errors name the host and its ranks' count: a prefix of the
		// rank checked (its first) blamed rank 0 for rank 2's core.
		if _, err := bindingFor(rp.Env, hostCPUs, rp.Host, plan.Apps[rp.App].Program); err != nil {
			return err
		}
	}
	return nil
}

// notices says, in a line each, what gorun sets for the ranks that the
// user did not ask for: OMP_NUM_THREADS and GOMAXPROCS.
func notices(plan *jobPlan, cfg *Config, hl *hostList, agents map[string]readyMsg, out *output) {
	if plan.SetsOMP() {
		out.Logf("setting OMP_NUM_THREADS=1 for each rank, as torchrun does, since ranks share a host's cores; set it, or pass -x OMP_NUM_THREADS=N, to choose")
	}
	policy, _ := parseBindPolicy(cfg.BindTo)
	shares := foreseeShares(plan, policy, func(host string) (int, int, bool) {
		if hl.local[host] {
			return runtime.NumCPU(), 0, true
		}
		return agents[host].CPUs, agents[host].Cores, false
	}, hostCPUs)
	if msg := procsNotice(shares); msg != "" {
		out.Logf("%s", msg)
	}
	cores := func(host string) int { return agents[host].Cores }
	if msg := autoBindNotice(plan, policy, hl.local, hostCPUs, cores); msg != "" {
		out.Logf("%s", msg)
	}
}

// openSeed opens the job's seed (cfg, its ports from ports). Without a
// rendezvous no rank that calls spmd.Init would find the others, so
// failing to open it fails the start.
func (l *Launcher) openSeed(ctx context.Context, cfg SeedConfig, ports string, out *output) (Seed, error) {
	if l.OpenSeed == nil {
		return nil, nil
	}
	cfg.Ports, _ = contract.ParsePortRange(ports)
	cfg.Logf = out.Verbosef
	seed, err := l.OpenSeed(ctx, cfg)
	if err != nil {
		what := "the job's rendezvous"
		if cfg.Gossip {
			what += " and gossip seed"
		}
		hint := ""
		if ports != "" {
			hint = fmt.Sprintf(" (--ports %s)", ports)
		}
		return nil, fmt.Errorf("cannot open %s on %s%s: %w", what, cfg.BindAddr, hint, err)
	}
	if cfg.Verbose && seed.Addr() != "" {
		out.Verbosef("gossip seed listening on %s", seed.Addr())
	}
	return seed, nil
}

// checkPorts fails when --ports has fewer ports than a host of the job
// needs: one per rank there for its data-plane listener, two in a job
// across hosts (its gossip node too), and on this machine the rendezvous
// and, across hosts, the gossip seed. The ranks found out one by one,
// each failing with "every port in 40000-40000 is in use".
func checkPorts(cfg *Config, hl *hostList) error {
	pr, err := contract.ParsePortRange(cfg.Ports)
	if cfg.Ports == "" || err != nil {
		return nil // none, or Validate's to say
	}
	ranks := map[string]int{}
	for _, h := range hl.rankHost {
		ranks[h]++
	}
	perRank, seeds, seedWhat, rankWhat := 1, 1, "the rendezvous", "its listener"
	if hl.remote() {
		seeds, seedWhat = 2, "the rendezvous and the gossip seed"
		if len(ranks) > 1 {
			perRank, rankWhat = 2, "its listener and gossip node"
		}
	}
	have := pr.High - pr.Low + 1
	need, host, why := seeds, "this machine", fmt.Sprintf("%d for %s", seeds, seedWhat)
	for _, h := range hl.hosts {
		n, w := ranks[h.Name]*perRank, fmt.Sprintf("%d for each of its %d %s (%s)", perRank, ranks[h.Name], plural(ranks[h.Name], "rank"), rankWhat)
		if hl.local[h.Name] {
			n, w = n+seeds, fmt.Sprintf("%d for %s and %s", seeds, seedWhat, w)
		}
		if n > need {
			need, host, why = n, "host "+h.Name, w
		}
	}
	if need <= have {
		return nil
	}
	return errorf(ErrUsage, "--ports %s: %d %s, and %s needs %d: %s; widen it, as in --ports %d-%d",
		cfg.Ports, have, plural(have, "port"), host, need, why, pr.Low, min(pr.Low+need-1, 65535))
}

// ExitCode is the status gorun exits with for an error from Run: 2 for
// ErrUsage, 127 for errNotFound, 126 for ErrNotExecutable, else 1.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	case errors.Is(err, errNotFound):
		return 127
	case errors.Is(err, ErrNotExecutable):
		return 126
	case errors.Is(err, errHost):
		return exitLost
	}
	return 1
}

// exitTimeout is gorun's exit status when --timeout stopped the job.
const exitTimeout = 124

func newID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort returns a TCP port in ports that was free on bind a moment ago;
// 0 if none was. bind "" (a job on this machine) probes every address, as
// PyTorch's TCPStore binds its MASTER_PORT on [::] and 0.0.0.0: a port
// free on 127.0.0.1 alone, taken on another address, was handed out and
// failed rank 0's store with EADDRINUSE.
func freePort(bind string, ports contract.PortRange) int {
	port := 0
	ports.Try(func(p int) error {
		ln, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(p)))
		if err != nil {
			return err
		}
		port = ln.Addr().(*net.TCPAddr).Port
		return ln.Close()
	})
	return port
}

// interrupted reports whether ctx ended, as a signal to gorun ends it,
// and then the launch's status: 128 and the signal's number (130 for
// Ctrl-C), as for a job the signal stopped, or 1 when no signal came.
func (l *Launcher) interrupted(ctx context.Context) (int, bool) {
	if ctx.Err() == nil {
		return 0, false
	}
	select {
	case sig := <-l.Signals:
		if ss, ok := sig.(syscall.Signal); ok {
			return 128 + int(ss), true
		}
	case <-time.After(signalLag):
	}
	return 1, true
}
