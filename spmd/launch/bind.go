package launch

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// Binding ranks to CPUs (--bind-to), as mpirun does: each rank of a host
// gets one unit of the host's CPUs — a hardware thread, a core (its
// hardware threads) or a socket (its cores) — in the order of local ranks,
// so that rank 0 of a host takes the first core, rank 1 the second, and so
// on. The units come from the CPUs the starter itself may run on (under
// Slurm or a cpuset, the allocation's), grouped by the kernel's topology
// (/sys/devices/system/cpu). The starter of the host (gorun, or the host's
// agent) decides, from GORUN_BIND_TO and the rank's local rank and local
// size, so that a remote host binds by its own CPUs.
//
// By default (auto) a starter binds its ranks to cores when they are as
// many as the cores it may use, and those are at least autoBindMinCores:
// one rank per core. Otherwise it binds nothing, where mpirun binds to
// sockets beyond 2 ranks: two jobs bound on one host take the
// same first cores and leave the rest idle, and binding 4 ranks to 2
// cores (2 each) did not change an 8-byte to 4 KiB all-reduce over TCP
// for either gorun or Open MPI (medians of 4 alternating runs: 51-65 us
// against 50-62 unbound).
//
// Why one rank per core is bound (issue #29, a 16-core VM, np 16): a rank
// that waits for a peer polls for a while and then sleeps; unbound, the
// kernel wakes it on whichever core looks best, and with every core
// polling that core is busy, so the wake-up queues behind a polling rank.
// One late hop made the next peer's poll run out too, and the job stayed
// in that state: back-to-back 8-byte recursive-doubling all-reduces took
// 265-268 us a call unbound (p90 1.3 ms, 2,600 sleeps in 2,000 calls)
// against 8 us bound (p90 9-10 us, 2 sleeps); 1 KiB all-gathers 6.7-8.3
// against 2.2-3.2 us; a step of examples/zero's MLP 33-38 ms (DDP) and
// 34-35 ms (ZeRO-3) against 28-34 and 23 ms. Bound, a sleeping rank's own
// core is free when it is woken. With a core to spare the trouble is
// gone: 12 and 15 ranks on the 16 cores unbound ran those all-reduces in
// 8 us a call, as bound (at 12: 8.0-8.3 against 9.1-13.1), so auto binds
// only a host its ranks fill. On 2 cores np 2 bound once measured slower
// (8-byte all-reduce 1.6-2.2 against 0.8-1.2 us on the 2-core development
// VM), but that was bound ranks taking their host for a crowded one
// (contract.HostCPUs); since, bound was as fast or faster there (medians
// of 8 alternating collbench runs, 8 B: all-reduce 0.24 against 0.42 us,
// all-gather 0.20 against 0.28, broadcast 0.21 against 0.23), so auto
// binds from 2 cores, as mpirun binds up to 2 ranks to cores.

// A unit holds as many ranks as it has cores (one for a core or a hardware
// thread), as Open MPI counts overload; more need :overload-allowed.

// autoBindMinCores is the fewest cores on which auto binds one rank to
// each (see above).
const autoBindMinCores = 2

// bindPolicy is what --bind-to asks for.
type bindPolicy struct {
	Unit     string // "auto", "none", "hwthread", "core" or "socket"
	Overload bool   // more ranks than units share them (":overload-allowed")
}

// parseBindPolicy reads auto, none, hwthread, core or socket, optionally
// followed by ":overload-allowed"; "" is auto. package is a name for
// socket.
func parseBindPolicy(s string) (bindPolicy, error) {
	unit, qual, hasQual := strings.Cut(s, ":")
	p := bindPolicy{Unit: unit}
	switch unit {
	case "", "auto":
		p.Unit = "auto"
	case "none", "hwthread", "core", "socket":
	case "package":
		p.Unit = "socket"
	default:
		return p, fmt.Errorf("%q: want auto, none, hwthread, core or socket, optionally with :overload-allowed", s)
	}
	if hasQual {
		if qual != "overload-allowed" || p.Unit == "none" || p.Unit == "auto" {
			return p, fmt.Errorf("%q: the one qualifier is :overload-allowed, after hwthread, core or socket", s)
		}
		p.Overload = true
	}
	return p, nil
}

// refusesOverload says whether p refuses more ranks on a unit than it has
// cores: every unit but none and auto (which binds only where the ranks
// fit), unless :overload-allowed.
func (p bindPolicy) refusesOverload() bool {
	return p.Unit != "none" && p.Unit != "auto" && !p.Overload
}

func (p bindPolicy) String() string {
	if p.Overload {
		return p.Unit + ":overload-allowed"
	}
	return p.Unit
}

// cpuInfo is one CPU the starter may use, with where it sits.
type cpuInfo struct{ cpu, core, socket int }

// bindUnit is one unit ranks are bound to: its CPUs, in order, and how
// many ranks it holds without overload (its cores: one for a core or a
// hardware thread).
type bindUnit struct {
	cpus  []int
	cores int
}

// bindUnits groups cpus into the units of unit, ordered by their first
// CPU.
func bindUnits(cpus []cpuInfo, unit string) []bindUnit {
	key := func(c cpuInfo) [2]int {
		switch unit {
		case "socket":
			return [2]int{c.socket, 0}
		case "core":
			return [2]int{c.socket, c.core}
		}
		return [2]int{c.cpu, -1}
	}
	cpus = slices.Clone(cpus) // the caller's, such as hostCPUs' shared list
	sort.Slice(cpus, func(i, j int) bool { return cpus[i].cpu < cpus[j].cpu })
	index := map[[2]int]int{}
	cores := map[[2]int]bool{}
	var units []bindUnit
	for _, c := range cpus {
		k := key(c)
		i, ok := index[k]
		if !ok {
			i = len(units)
			index[k] = i
			units = append(units, bindUnit{})
		}
		units[i].cpus = append(units[i].cpus, c.cpu)
		core := [2]int{c.socket, c.core}
		switch {
		case unit != "socket":
			units[i].cores = 1
		case !cores[core]:
			cores[core] = true
			units[i].cores++
		}
	}
	return units
}

// binding is what a starter does for one rank: the CPUs to bind it to (nil:
// none) and how to say so.
type binding struct {
	cpus   []int
	ranks  int    // the ranks of the host bound to the same CPUs, this one included
	host   int    // the ranks of the host (GORUN_LOCAL_SIZE), where bound
	unit   string // what the rank is bound to: "none", "hwthread", "core" or "socket"
	auto   bool   // the unit is auto's choice, not the user's
	report bool
	what   string // "core 1 (cpus 1,3)", or "not bound"
}

// bindingFor reads the rank's GORUN_BIND_TO, GORUN_REPORT_BINDINGS,
// GORUN_LOCAL_RANK and GORUN_LOCAL_SIZE from env (the last setting of each
// wins) and picks its unit among the CPUs hostCPUs lists. It fails when
// the unit would hold more ranks than it has cores and the policy does not
// allow overload.
func bindingFor(env []string, hostCPUs func() ([]cpuInfo, error), host, path string) (binding, error) {
	b := binding{unit: "none", what: "not bound"}
	get := func(name string) string {
		v, _ := envValue(env, name)
		return v
	}
	b.report = get(contract.EnvReportBindings) == "1"
	p, err := parseBindPolicy(get(contract.EnvBindTo))
	if err != nil {
		return b, fmt.Errorf("%s %w", contract.EnvBindTo, err)
	}
	if p.Unit == "none" {
		return b, nil
	}
	if p.Unit == "auto" {
		if notGoProgram(path) {
			// A Python or C rank has no Go runtime threads to keep off its
			// peers' cores, and its own threads (OpenMP's, a DataLoader's
			// workers) would share one core: torchrun binds nothing.
			b.what = "not bound (auto binds Go programs only; --bind-to core binds any)"
			return b, nil
		}
		if !autoBinds(get(contract.EnvLocalSize), hostCPUs) {
			b.what = fmt.Sprintf("not bound (auto binds a rank to each core only where the host's ranks are as many as its cores, %d or more)", autoBindMinCores)
			return b, nil
		}
		p, b.auto = bindPolicy{Unit: "core"}, true
	}
	local, err1 := strconv.Atoi(get(contract.EnvLocalRank))
	size, err2 := strconv.Atoi(get(contract.EnvLocalSize))
	if err1 != nil || err2 != nil || local < 0 || local >= size {
		return b, fmt.Errorf("--bind-to %v: no valid %s and %s in the rank's environment", p, contract.EnvLocalRank, contract.EnvLocalSize)
	}
	cpus, err := hostCPUs()
	if err != nil {
		return b, fmt.Errorf("--bind-to %v on %s: %w", p, host, err)
	}
	units := bindUnits(cpus, p.Unit)
	if len(units) == 0 {
		return b, fmt.Errorf("--bind-to %v: found no CPU to bind to on %s", p, host)
	}
	// Local ranks go round-robin over the units: unit u holds the ranks
	// u, u+n, u+2n, ... of the host.
	u := local % len(units)
	on := (size - u + len(units) - 1) / len(units)
	if on > units[u].cores && p.refusesOverload() {
		return b, errorf(ErrUsage, "--bind-to %v: %d ranks on %s would put %d on %s %d, which holds %d (one per core); use --bind-to %s:overload-allowed to have ranks share it, or --bind-to none",
			p, size, host, on, p.Unit, u, units[u].cores, p.Unit)
	}
	b.cpus, b.ranks, b.host, b.unit = units[u].cpus, on, size, p.Unit
	b.what = fmt.Sprintf("%s %d (%s %s)", p.Unit, u, plural(len(b.cpus), "cpu"), cpuList(b.cpus))
	return b, nil
}

// autoBinds says whether auto binds the ranks of a host, size of them
// (GORUN_LOCAL_SIZE): one to each core, when they are as many as the
// cores that hostCPUs lists, and those are at least autoBindMinCores.
func autoBinds(size string, hostCPUs func() ([]cpuInfo, error)) bool {
	if n, err := strconv.Atoi(size); err != nil || n < autoBindMinCores {
		return false
	}
	cpus, err := hostCPUs()
	return err == nil && autoBindsOn(size, len(bindUnits(cpus, "core")))
}

// autoBindsOn says whether auto binds the ranks of a host with cores
// cores, size of them (GORUN_LOCAL_SIZE): as many as the cores, and at
// least autoBindMinCores.
func autoBindsOn(size string, cores int) bool {
	n, err := strconv.Atoi(size)
	return err == nil && n >= autoBindMinCores && n == cores
}

// boundEnv is env with what a rank reads about the CPUs it runs on:
// GORUN_HOST_CPUS, the hostCPUs its host's ranks share (unless the user
// set it), whatever its binding lets it see itself; and GORUN_BIND_TO=core
// for a rank that auto bound (b), so that it reads how it was bound, where
// others keep theirs.
func boundEnv(env []string, b binding, hostCPUs int) []string {
	if v, _ := envValue(env, contract.EnvHostCPUs); v == "" {
		env = append(slices.Clip(env), contract.EnvHostCPUs+"="+strconv.Itoa(hostCPUs))
	}
	if !b.auto {
		return env
	}
	return append(slices.Clip(env), contract.EnvBindTo+"="+b.unit)
}

// autoBindNotice is the launcher's one line on the ranks that auto binds,
// "" where it binds none: those of the first host, in node order, whose
// starter binds them, counting the other hosts. gorun judges this
// machine's ranks by its own CPUs (hostCPUs) and another host's by the
// cores its agent said it has (cores; 0, not said: nothing foreseen):
//
//	binding each of the 16 ranks of this host to a core of its own (one rank per core); --bind-to none leaves them unbound
//	binding each of the 4 ranks of host b to a core of its own (one rank per core), and likewise on 3 more hosts; --bind-to none leaves them unbound
func autoBindNotice(p *jobPlan, policy bindPolicy, local map[string]bool, hostCPUs func() ([]cpuInfo, error), cores func(host string) int) string {
	if policy.Unit != "auto" {
		return ""
	}
	first := map[string]rankPlan{} // each host's first rank
	for _, rp := range p.Ranks {
		if _, ok := first[rp.Host]; !ok {
			first[rp.Host] = rp
		}
	}
	msg, more := "", 0
	for _, h := range p.Hosts {
		rp := first[h]
		path := p.Apps[rp.App].Program
		size, _ := envValue(rp.Env, contract.EnvLocalSize)
		if local[h] {
			if b, err := bindingFor(rp.Env, hostCPUs, h, path); err != nil || !b.auto {
				continue
			}
		} else if notGoProgram(path) || !autoBindsOn(size, cores(h)) {
			continue // as the host's agent will judge (bindingFor)
		}
		if msg != "" {
			more++
			continue
		}
		where := "this host"
		if !local[h] {
			where = "host " + h
		}
		msg = fmt.Sprintf("binding each of the %s ranks of %s to a core of its own (one rank per core)", size, where)
	}
	if msg == "" {
		return ""
	}
	if more > 0 {
		msg += fmt.Sprintf(", and likewise on %d more %s", more, plural(more, "host"))
	}
	return msg + "; --bind-to none leaves them unbound"
}

// hostCores counts the cores among the CPUs this process may run on, as
// auto binds them; 0 where they cannot be read.
func hostCores() int {
	cpus, err := hostCPUs()
	if err != nil {
		return 0
	}
	return len(bindUnits(cpus, "core"))
}

// cpuList writes cpus as the kernel's lists do: 0-3,8.
func cpuList(cpus []int) string { return rankRanges(cpus) }

// readTopology returns where each of cpus sits, from sysfs; a CPU whose
// topology cannot be read is its own core on socket 0.
func readTopology(cpus []int) []cpuInfo {
	out := make([]cpuInfo, 0, len(cpus))
	for _, c := range cpus {
		info := cpuInfo{cpu: c, core: -1 - c}
		dir := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/", c)
		if v, ok := readInt(dir + "core_id"); ok {
			info.core = v
		}
		if v, ok := readInt(dir + "physical_package_id"); ok {
			info.socket = v
		}
		out = append(out, info)
	}
	return out
}

func readInt(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return v, err == nil
}
