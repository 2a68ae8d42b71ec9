package launch

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// secretFD is the descriptor a rank reads the per-job secret from: the first
// of exec.Cmd.ExtraFiles.
const secretFD = 3

// statusFD is the descriptor a rank started here reports its lost peers
// on (GORUN_STATUS_FD): the second of exec.Cmd.ExtraFiles.
const statusFD = 4

// jobPlan is what a job will start: one rankPlan per rank, in rank order.
// A jobPlan is built once and then only read.
type jobPlan struct {
	JobID   string
	Program string   // what runs: a path, or the package that will be built
	Args    []string // the program's arguments
	// Apps are the job's programs, one per context of an MPMD job (the
	// first is Program and Args); rankPlan.App indexes them.
	Apps  []App
	Hosts []string // the job's hosts, in node-rank order
	Ranks []rankPlan
}

// rankPlan is one rank of a jobPlan.
type rankPlan struct {
	Rank      int
	Host      string
	LocalRank int
	NodeRank  int
	App       int // which of jobPlan.Apps the rank runs
	// Env is what gorun sets for this rank, "NAME=VALUE" sorted by name, on
	// top of the environment the rank inherits.
	Env []string
	// ShareProcs says that the user chose no GOMAXPROCS for the rank, so
	// that its starter gives it its share of the host's CPUs (procs.go).
	ShareProcs bool
	// SetsOMP says that gorun, not the user, set the rank's
	// OMP_NUM_THREADS (ompShared).
	SetsOMP bool
	// Start says, for --dry-run, how the rank's starter binds it
	// ("binding: core 0 (cpu 0)"), or that its host's agent decides; "":
	// unsaid.
	Start string
}

// jobInfo is what is decided once per job, before planning.
type jobInfo struct {
	ID         string
	Seeds      []string          // gossip seed addresses (GORUN_SEEDS)
	Rendezvous string            // the rendezvous's address (GORUN_RENDEZVOUS)
	HostIDs    map[string]string // host -> GORUN_HOST_ID; a missing host: unset
	MasterAddr string            // MASTER_ADDR
	MasterPort int               // MASTER_PORT
	BindAddrs  map[string]string // host -> GORUN_BIND_ADDR; a missing host: unset (its agent sets it)
	Ports      string            // GORUN_PORTS: LOW-HIGH, or ""
	// Slurm says that the ranks run inside a Slurm allocation, each
	// through its node's agent: each gets the SLURM_* variables of a task
	// of one step of the job's ranks (slurmStep).
	Slurm bool
	// Getenv resolves -x VAR without a value; nil means os.Getenv.
	Getenv func(string) string
}

// sameHost places np ranks on the one host named host.
func sameHost(np int, host string) []string {
	h := make([]string, np)
	for i := range h {
		h[i] = host
	}
	return h
}

// newPlan plans cfg.NP ranks; hosts[i] is the host of rank i. Local ranks
// count the ranks of each host in rank order; node ranks number the hosts in
// order of their first rank.
func newPlan(cfg *Config, job jobInfo, hosts []string) (*jobPlan, error) {
	if len(hosts) != cfg.NP {
		return nil, fmt.Errorf("plan: %d hosts for %d ranks", len(hosts), cfg.NP)
	}
	getenv := job.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	jobExports, err := exports(cfg.Export, getenv)
	if err != nil {
		return nil, err
	}
	p := &jobPlan{JobID: job.ID, Program: cfg.Program, Args: cfg.Args, Apps: cfg.contexts()}
	appOf := make([]int, 0, cfg.NP) // rank -> context
	appExports := make([]map[string]string, len(p.Apps))
	appProcs := make([]bool, len(p.Apps)) // the starter picks GOMAXPROCS
	for i, a := range p.Apps {
		for k := 0; k < a.NP; k++ {
			appOf = append(appOf, i)
		}
		if appExports[i], err = exports(a.Export, getenv); err != nil {
			return nil, err
		}
		appProcs[i] = !choseVar(contract.EnvGoMaxProcs, getenv, cfg.Export, a.Export)
	}
	if len(appOf) != cfg.NP {
		return nil, fmt.Errorf("plan: the programs have %d ranks, the job %d", len(appOf), cfg.NP)
	}
	node := map[string]int{}
	localSize := map[string]int{}
	for _, h := range hosts {
		if _, ok := node[h]; !ok {
			node[h] = len(p.Hosts)
			p.Hosts = append(p.Hosts, h)
		}
		localSize[h]++
	}
	var step slurmStep
	if job.Slurm {
		perNode := make([]int, len(p.Hosts))
		for i, h := range p.Hosts {
			perNode[i] = localSize[h]
		}
		step = newSlurmStep(p.Hosts, perNode)
	}
	local := map[string]int{}
	for r, h := range hosts {
		rp := rankPlan{Rank: r, Host: h, LocalRank: local[h], NodeRank: node[h], App: appOf[r], ShareProcs: appProcs[appOf[r]]}
		local[h]++
		env := map[string]string{
			contract.EnvRank:            strconv.Itoa(r),
			contract.EnvSize:            strconv.Itoa(cfg.NP),
			contract.EnvLocalRank:       strconv.Itoa(rp.LocalRank),
			contract.EnvLocalSize:       strconv.Itoa(localSize[h]),
			contract.EnvNodeRank:        strconv.Itoa(rp.NodeRank),
			contract.EnvNodeCount:       strconv.Itoa(len(node)),
			contract.EnvJobID:           job.ID,
			contract.EnvSecretFD:        strconv.Itoa(secretFD),
			contract.EnvTorchRank:       strconv.Itoa(r),
			contract.EnvTorchWorldSize:  strconv.Itoa(cfg.NP),
			contract.EnvTorchLocalRank:  strconv.Itoa(rp.LocalRank),
			contract.EnvTorchLocalWorld: strconv.Itoa(localSize[h]),
			contract.EnvTorchGroupRank:  strconv.Itoa(rp.NodeRank),
			contract.EnvTorchGroupSize:  strconv.Itoa(len(node)),
			contract.EnvTorchRoleRank:   strconv.Itoa(r),
			contract.EnvTorchRoleSize:   strconv.Itoa(cfg.NP),
			contract.EnvTorchRoleName:   "default",
			contract.EnvTorchRunID:      job.ID,
			contract.EnvTorchRestarts:   strconv.Itoa(cfg.restart),
			contract.EnvTorchMaxRestart: strconv.Itoa(cfg.MaxRestarts),
			contract.EnvRestartCount:    strconv.Itoa(cfg.restart),
			contract.EnvMaxRestarts:     strconv.Itoa(cfg.MaxRestarts),
		}
		if cfg.runID != "" {
			env[contract.EnvTorchRunID] = cfg.runID
		}
		if job.Slurm {
			step.setTask(env, rp)
		}
		// A rank's stdout is a pipe to gorun, which Python buffers in
		// blocks: a rank's prints came at its exit, and a rank that the
		// job's stop killed (SIGTERM) lost them all. Under torchrun a
		// rank writes to the terminal, line by line. Python sets none of
		// it itself: PYTHONUNBUFFERED=1, unless the user chose a value.
		if !choseVar(envPythonUnbuffered, getenv, cfg.Export, p.Apps[rp.App].Export) {
			env[envPythonUnbuffered] = "1"
		}
		if ompShared(localSize[h], getenv, jobExports, appExports[rp.App]) {
			env[contract.EnvOMPThreads] = "1"
			rp.SetsOMP = true
		}
		setIf(env, contract.EnvSeeds, strings.Join(job.Seeds, ","))
		setIf(env, contract.EnvRendezvous, job.Rendezvous)
		setIf(env, contract.EnvHostID, job.HostIDs[h])
		setIf(env, contract.EnvMasterAddr, job.MasterAddr)
		setIf(env, contract.EnvBindAddr, job.BindAddrs[h])
		setIf(env, contract.EnvPorts, job.Ports)
		switch {
		case job.MasterPort > 0:
			env[contract.EnvMasterPort] = strconv.Itoa(job.MasterPort)
		case cfg.DryRun:
			env[contract.EnvMasterPort] = "<a free port, chosen at launch>"
		}
		if cfg.DryRun { // the starter sets it beside the descriptor it opens
			env[contract.EnvStatusFD] = strconv.Itoa(statusFD)
		}
		if cfg.InitTimeout > 0 {
			env[contract.EnvInitTimeout] = time.Duration(cfg.InitTimeout).String()
		}
		setIf(env, contract.EnvProfileDir, cfg.ProfileDir)
		if cfg.ProfileCPU {
			env[contract.EnvProfileCPU] = "1"
		}
		// auto is the variable's absence, which starters older than auto
		// read as none.
		if b, _ := parseBindPolicy(cfg.BindTo); b.Unit != "auto" {
			env[contract.EnvBindTo] = b.String()
		}
		if d, _ := parseTimerSlack(cfg.TimerSlack); d >= 0 {
			env[contract.EnvTimerSlack] = d.String()
		}
		if cfg.ReportBindings {
			env[contract.EnvReportBindings] = "1"
		}
		if cfg.Verbose {
			env[contract.EnvVerbose] = "1"
		}
		for k, v := range jobExports {
			env[k] = v
		}
		for k, v := range appExports[rp.App] {
			env[k] = v
		}
		rp.Env = sortedEnv(env)
		p.Ranks = append(p.Ranks, rp)
	}
	return p, nil
}

// envPythonUnbuffered makes Python write its stdout and stderr as it
// prints.
const envPythonUnbuffered = "PYTHONUNBUFFERED"

// ompShared says whether gorun sets OMP_NUM_THREADS=1 for the ranks of a
// host, as torchrun does: when several ranks share the host's cores and
// the user has set no value, in gorun's environment or with -x, so that
// each rank's OpenMP (PyTorch's intra-op threads, OpenBLAS) does not start
// a thread per core.
func ompShared(local int, getenv func(string) string, exports ...map[string]string) bool {
	for _, x := range exports {
		if _, ok := x[contract.EnvOMPThreads]; ok {
			return false
		}
	}
	return local > 1 && getenv(contract.EnvOMPThreads) == ""
}

// SetsOMP says whether the plan sets OMP_NUM_THREADS for some rank, for
// the launcher's one line about it.
func (p *jobPlan) SetsOMP() bool {
	for _, r := range p.Ranks {
		if r.SetsOMP {
			return true
		}
	}
	return false
}

func setIf(env map[string]string, k, v string) {
	if v != "" {
		env[k] = v
	}
}

func sortedEnv(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// exports resolves -x entries: VAR=VAL as given, VAR from getenv (skipped
// when unset, as mpirun does).
func exports(xs []string, getenv func(string) string) (map[string]string, error) {
	out := map[string]string{}
	for _, x := range xs {
		name, val, ok := strings.Cut(x, "=")
		if !validVarName(name) {
			return nil, errorf(ErrUsage, "-x %q: want VAR or VAR=VALUE, VAR letters, digits and _, not starting with a digit", x)
		}
		if !ok {
			val = getenv(name)
			if val == "" {
				continue
			}
		}
		out[name] = val
	}
	return out, nil
}

// contractVars are the variables gorun sets per rank; -x may not override them.
var contractVars = map[string]bool{
	contract.EnvRank: true, contract.EnvSize: true, contract.EnvLocalRank: true, contract.EnvLocalSize: true,
	contract.EnvNodeRank: true, contract.EnvNodeCount: true, contract.EnvJobID: true, contract.EnvSeeds: true,
	contract.EnvRendezvous: true, contract.EnvSecretFD: true, contract.EnvSecret: true, contract.EnvStatusFD: true,
	contract.EnvTorchRank: true, contract.EnvTorchWorldSize: true, contract.EnvTorchLocalRank: true,
	contract.EnvTorchLocalWorld: true, contract.EnvTorchGroupRank: true, contract.EnvTorchGroupSize: true,
	contract.EnvTorchRoleRank: true, contract.EnvTorchRoleSize: true, contract.EnvTorchRoleName: true, contract.EnvTorchRunID: true,
	contract.EnvTorchRestarts: true, contract.EnvTorchMaxRestart: true,
	contract.EnvRestartCount: true, contract.EnvMaxRestarts: true,
}

func isContractVar(name string) bool { return contractVars[name] }

// foreseeStarts does for --dry-run what the starters will do to each
// rank's environment and CPUs: for a rank of this machine (local), the
// GOMAXPROCS, GORUN_HOST_CPUS and GORUN_BIND_TO its start adds and its
// binding, as local.Start; for another host's, a word that its agent
// decides them by that host's CPUs.
func (p *jobPlan) foreseeStarts(local map[string]bool, hostCPUs func() ([]cpuInfo, error), cpus int) error {
	for i := range p.Ranks {
		rp := &p.Ranks[i]
		if !local[rp.Host] {
			rp.Start = "binding, GOMAXPROCS and GORUN_HOST_CPUS: chosen by " + rp.Host + "'s agent at launch"
			continue
		}
		bind, err := bindingFor(rp.Env, hostCPUs, rp.Host, p.Apps[rp.App].Program)
		if err != nil {
			return fmt.Errorf("rank %d: %w", rp.Rank, err)
		}
		rp.Env = boundEnv(procsEnv(rp.Env, *rp, bind, cpus), bind, cpus)
		sort.Strings(rp.Env)
		rp.Start = "binding: none"
		if bind.cpus != nil {
			rp.Start = "binding: " + bind.what
		}
		if slack, err := slackFor(rp.Env, bind, p.Apps[rp.App].Program); err == nil && slack.d > 0 {
			rp.Start += fmt.Sprintf(", timer slack %v", slack.d)
		}
	}
	return nil
}

// Format writes the plan for --dry-run: a header line, then per rank one
// line with its host and local rank and one indented line per variable.
func (p *jobPlan) Format(w io.Writer) error {
	var b strings.Builder
	cmd := strings.Join(append([]string{p.Program}, p.Args...), " ")
	if len(p.Apps) > 1 {
		var parts []string
		for _, a := range p.Apps {
			parts = append(parts, fmt.Sprintf("-np %d %s", a.NP, strings.Join(append([]string{a.Program}, a.Args...), " ")))
		}
		cmd = strings.Join(parts, " : ")
	}
	fmt.Fprintf(&b, "job %s: %d %s of %s on %d %s\n",
		p.JobID, len(p.Ranks), plural(len(p.Ranks), "rank"), cmd, len(p.Hosts), plural(len(p.Hosts), "host"))
	for _, r := range p.Ranks {
		fmt.Fprintf(&b, "rank %d: host %s, node %d, local rank %d", r.Rank, r.Host, r.NodeRank, r.LocalRank)
		if len(p.Apps) > 1 {
			fmt.Fprintf(&b, ", program %d (%s)", r.App+1, p.Apps[r.App].Program)
		}
		b.WriteString("\n")
		if r.Start != "" { // its own line, two spaces in: the rank line and the variables parse as before
			fmt.Fprintf(&b, "  %s\n", r.Start)
		}
		for _, kv := range r.Env {
			fmt.Fprintf(&b, "    %s\n", kv)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// pronoun is one, for one thing, else many: "it" or "them", "its" or
// "their".
func pronoun(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}
