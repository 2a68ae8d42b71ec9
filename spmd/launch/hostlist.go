package launch

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/spmd/launch/hosts"
)

// Where the ranks of a job run.
const (
	modeLocal = "local" // every rank on this machine, no host list
)

// hostList is the job's hosts and which rank runs on which.
type hostList struct {
	mode     string       // modeLocal, modeSSH or ModeSrun
	source   string       // where the list came from, for messages
	hosts    []hosts.Host // the list, in its order
	rankHost []string     // host name per rank
	local    map[string]bool
	slotsVar string // inside Slurm: the variable the slots came from (hosts.SlotsVar)
	note     string // inside Slurm, a step of one task: where the ranks go, for --verbose
}

// resolveHosts reads the host list of cfg: -H, --hostfile, a Slurm
// allocation (SLURM_JOB_NODELIST, when neither is given), else this
// machine. It maps the ranks and sets cfg.NP when it was 0 (one rank per
// slot).
func resolveHosts(cfg *Config, getenv func(string) string) (*hostList, error) {
	hl := &hostList{mode: modeSSH, local: map[string]bool{}}
	var err error
	switch {
	case cfg.Hosts != "":
		hl.source = "-H"
		hl.hosts, err = hosts.ParseHostList(cfg.Hosts)
		var perr *hosts.ParseError
		switch {
		case errors.As(err, &perr) && perr.Text == cfg.Hosts: // the one entry: say it once
			return nil, errorf(ErrUsage, "-H %s: %s", cfg.Hosts, perr.Msg)
		case errors.As(err, &perr):
			return nil, errorf(ErrUsage, "-H %s: entry %q: %s", cfg.Hosts, perr.Text, perr.Msg)
		case err != nil:
			return nil, errorf(ErrUsage, "-H %s: %w", cfg.Hosts, err)
		}
	case cfg.Hostfile != "":
		hl.source = cfg.Hostfile
		f, err := os.Open(cfg.Hostfile)
		if err != nil {
			return nil, errorf(ErrUsage, "%s: %w", cfg.named("--hostfile"), err)
		}
		defer f.Close()
		hl.hosts, err = hosts.ParseHostfile(cfg.Hostfile, f)
		if err != nil {
			return nil, errorf(ErrUsage, "%w", err)
		}
		if len(hl.hosts) == 0 {
			return nil, errorf(ErrUsage, "--hostfile %s lists no hosts", cfg.Hostfile)
		}
	default:
		var ok bool
		hl.hosts, ok, err = hosts.FromSlurm(getenv)
		if err != nil {
			return nil, errorf(ErrUsage, "Slurm allocation: %w", err)
		}
		if !ok {
			return localHosts(cfg, hl)
		}
		if err := checkStep(getenv); err != nil {
			return nil, err
		}
		hl.mode, hl.source = ModeSrun, "the Slurm allocation"
		hl.slotsVar = hosts.SlotsVar(getenv)
		if hosts.StepOfOne(getenv) && hl.slotsVar != hosts.EnvSlurmTasksPerNode {
			hl.source = "the Slurm job's allocation"
			hl.note = fmt.Sprintf("running as the one task of Slurm step %s.%s, whose %s is its own: placing ranks on the job's allocation, %s (--npernode sets ranks per node)",
				getenv("SLURM_JOB_ID"), getenv(hosts.EnvSlurmStepID), hosts.EnvSlurmTasksPerNode, slotsSaid(hl.slotsVar, getenv))
		}
	}
	if hl.mode == modeSSH {
		hl.hosts = mergeLocal(hl.hosts)
	}
	policy, _ := hosts.ParsePolicy(cfg.MapBy)
	if cfg.MapBy == "" {
		policy = hosts.BySlot
	}
	places, err := hosts.Map(hl.hosts, cfg.NP, hosts.MapOptions{
		Policy: policy, NPerNode: cfg.NPerNode, Oversubscribe: cfg.Oversubscribe,
	})
	var se *hosts.SlotsError
	if errors.As(err, &se) && errors.Is(err, hosts.ErrNotEnoughSlots) && hl.mode == ModeSrun {
		// In Slurm's words: its tasks are the slots.
		return nil, errorf(ErrUsage, "%s: %d ranks requested but it has %d %s on %d %s (%s); ask salloc or sbatch for more (-n), or pass --oversubscribe",
			hl.source, se.Requested, se.Slots, plural(se.Slots, "task"), se.Hosts, plural(se.Hosts, "node"), slotsSaid(hl.slotsVar, getenv))
	}
	if err != nil {
		return nil, errorf(ErrUsage, "%s: %w", hl.source, err)
	}
	cfg.NP = len(places)
	for _, p := range places {
		hl.rankHost = append(hl.rankHost, hl.hosts[p.HostIndex].Name)
	}
	if hl.mode == modeSSH {
		for _, h := range hl.hosts {
			if isLocalName(h.Name) && h.User == "" && h.Addr == "" {
				hl.local[h.Name] = true
			}
		}
	}
	return hl, nil
}

// checkStep refuses a gorun that runs as one of several tasks of a Slurm
// step (srun -N2 gorun, as torchrun is run): each would start the whole
// job on the allocation's nodes, two jobs where one was meant. A step of
// one task (srun -n1 gorun) runs gorun once, as the batch script would.
func checkStep(getenv func(string) string) error {
	if getenv(envSlurmStepID) == "" {
		return nil
	}
	n, err := strconv.Atoi(getenv(envSlurmStepNumTasks))
	if err != nil || n < 2 {
		return nil
	}
	return errorf(ErrUsage, "started as each of the %d tasks of a Slurm step (%s=%d), and each would start the whole job on the allocation's nodes: run gorun once, in the batch script or salloc's shell or as a step of one task (srun -n1 gorun ...); it starts one agent per node with srun itself",
		n, envSlurmStepNumTasks, n)
}

// slotsSaid says where the slots of a Slurm allocation came from: the
// variable FromSlurm read them from, "SLURM_TASKS_PER_NODE" or
// "SLURM_JOB_CPUS_PER_NODE=4(x2) / SLURM_CPUS_PER_TASK=2", or one per node.
func slotsSaid(v string, getenv func(string) string) string {
	switch {
	case v == "":
		return "one task per node, for want of " + hosts.EnvSlurmCPUsPerNode
	case v == hosts.EnvSlurmTasksPerNode:
		return v
	case getenv(hosts.EnvSlurmCPUsPerTask) != "":
		return fmt.Sprintf("one task per %s CPUs (%s=%s) of %s=%s", getenv(hosts.EnvSlurmCPUsPerTask),
			hosts.EnvSlurmCPUsPerTask, getenv(hosts.EnvSlurmCPUsPerTask), v, getenv(v))
	default:
		return fmt.Sprintf("one task per CPU of %s=%s", v, getenv(v))
	}
}

// localHosts places every rank on this machine, as without a host list.
func localHosts(cfg *Config, hl *hostList) (*hostList, error) {
	if cfg.NP == 0 && cfg.NPerNode > 0 { // mpirun --npernode N: N ranks on the one host
		cfg.NP = cfg.NPerNode
	}
	if cfg.NP < 1 {
		return nil, errorf(ErrUsage, "-np %d: want at least 1 rank, as in gorun -np 4 %s (or give a host list)", cfg.NP, cfg.Program)
	}
	if cpus := runtime.NumCPU(); cfg.NP > maxRanksPerCPU*cpus && !cfg.Oversubscribe {
		return nil, errorf(ErrUsage, "-np %d on this machine's %d %s: more than %d ranks per CPU needs --oversubscribe (or give a host list, -H or --hostfile)",
			cfg.NP, cpus, plural(cpus, "CPU"), maxRanksPerCPU)
	}
	if cfg.NPerNode > 0 && cfg.NP > cfg.NPerNode {
		return nil, errorf(ErrUsage, "-np %d with --npernode %d on one machine: give a host list (-H or --hostfile) for more hosts", cfg.NP, cfg.NPerNode)
	}
	host := hostname()
	if host == "" {
		host = "localhost"
	}
	hl.mode, hl.source = modeLocal, "this machine"
	hl.hosts = []hosts.Host{{Name: host, Slots: cfg.NP}}
	hl.rankHost = sameHost(cfg.NP, host)
	hl.local[host] = true
	return hl, nil
}

// remote reports whether any rank runs through an agent.
func (hl *hostList) remote() bool {
	for _, h := range hl.rankHost {
		if !hl.local[h] {
			return true
		}
	}
	return false
}

// hasLocal reports whether any rank runs on this machine, started by the
// launcher itself.
func (hl *hostList) hasLocal() bool {
	for _, h := range hl.rankHost {
		if hl.local[h] {
			return true
		}
	}
	return false
}

// targets lists the hosts that have ranks and need an agent, with host
// indices from 1.
func (hl *hostList) targets() []target {
	used := map[string]bool{}
	for _, h := range hl.rankHost {
		used[h] = true
	}
	var ts []target
	for _, h := range hl.hosts {
		if used[h.Name] && !hl.local[h.Name] {
			ts = append(ts, target{Index: len(ts) + 1, Name: h.Name, Dest: h.Destination()})
		}
	}
	return ts
}

// isLocalName reports whether a host list entry names this machine.
// mergeLocal makes the entries of list that name this machine (localhost,
// its hostname, 127.0.0.1) one host, under the first of their names, with
// their slots added, as Open MPI does: as two hosts they were planned and
// bound as two machines, two ranks to a core, on one.
func mergeLocal(list []hosts.Host) []hosts.Host {
	out := list[:0:0]
	first := -1
	for _, h := range list {
		if !isLocalName(h.Name) || h.User != "" || h.Addr != "" {
			out = append(out, h)
			continue
		}
		if first < 0 {
			first = len(out)
			out = append(out, h)
			continue
		}
		m := &out[first]
		m.Slots += h.Slots
		if m.MaxSlots > 0 && h.MaxSlots > 0 {
			m.MaxSlots += h.MaxSlots
		} else {
			m.MaxSlots = 0
		}
	}
	return out
}

func isLocalName(name string) bool {
	switch name {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	h := hostname()
	short, _, _ := strings.Cut(h, ".")
	return h != "" && (name == h || name == short)
}

// Map formats the rank-to-host map for --dry-run: "host h1 (ssh): ranks
// 0-1", and with the destination that ssh connects to where it is not the
// name, "host h2 (ssh alice@h2): ranks 2".
func (hl *hostList) Map() string {
	var b strings.Builder
	seen := map[string][]int{}
	var order []string
	for r, h := range hl.rankHost {
		if _, ok := seen[h]; !ok {
			order = append(order, h)
		}
		seen[h] = append(seen[h], r)
	}
	how := map[string]string{modeLocal: "local", modeSSH: "ssh", ModeSrun: "srun"}
	dest := map[string]string{}
	for _, h := range hl.hosts {
		dest[h.Name] = h.Destination()
	}
	for _, h := range order {
		via := how[hl.mode]
		switch {
		case hl.local[h]:
			via = "local"
		case hl.mode == modeSSH && dest[h] != h:
			via += " " + dest[h]
		}
		fmt.Fprintf(&b, "host %s (%s): ranks %s\n", h, via, rankRanges(seen[h]))
	}
	return b.String()
}

// rankRanges formats sorted numbers (ranks, CPUs) as "0-3,6".
func rankRanges(rs []int) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", rs[i], rs[j]))
		} else {
			parts = append(parts, fmt.Sprint(rs[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
