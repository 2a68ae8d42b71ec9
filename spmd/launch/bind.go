package launch

import (
	"fmt"
	"os"
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
// gorun binds nothing by default, where mpirun binds to cores (up to 2
// ranks) or sockets: two jobs bound on one host take the same first cores
// and leave the rest idle. Binding 4 ranks to 2 cores (2 each) did not
// change an 8-byte to 4 KiB all-reduce over TCP for either gorun or Open
// MPI (medians of 4 alternating runs: 51-65 us against 50-62 unbound).

// A unit holds as many ranks as it has cores (one for a core or a hardware
// thread), as Open MPI counts overload; more need :overload-allowed.

// bindPolicy is what --bind-to asks for.
type bindPolicy struct {
	Unit     string // "none", "hwthread", "core" or "socket"
	Overload bool   // more ranks than units share them (":overload-allowed")
}

// parseBindPolicy reads none, hwthread, core or socket, optionally followed
// by ":overload-allowed"; "" is none. package is a name for socket.
func parseBindPolicy(s string) (bindPolicy, error) {
	unit, qual, hasQual := strings.Cut(s, ":")
	p := bindPolicy{Unit: unit}
	switch unit {
	case "", "none":
		p.Unit = "none"
	case "hwthread", "core", "socket":
	case "package":
		p.Unit = "socket"
	default:
		return p, fmt.Errorf("%q: want none, hwthread, core or socket, optionally with :overload-allowed", s)
	}
	if hasQual {
		if qual != "overload-allowed" || p.Unit == "none" {
			return p, fmt.Errorf("%q: the one qualifier is :overload-allowed, after hwthread, core or socket", s)
		}
		p.Overload = true
	}
	return p, nil
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
	ranks  int // the ranks of the host bound to the same CPUs, this one included
	report bool
	what   string // "core 1 (cpus 1,3)", or "not bound"
}

// bindingFor reads the rank's GORUN_BIND_TO, GORUN_REPORT_BINDINGS,
// GORUN_LOCAL_RANK and GORUN_LOCAL_SIZE from env (the last setting of each
// wins) and picks its unit among the CPUs hostCPUs lists. It fails when
// the unit would hold more ranks than it has cores and the policy does not
// allow overload.
func bindingFor(env []string, hostCPUs func() ([]cpuInfo, error), host string) (binding, error) {
	b := binding{what: "not bound"}
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
	if on > units[u].cores && !p.Overload {
		return b, errorf(ErrUsage, "--bind-to %v: %d ranks on %s would put %d on %s %d, which holds %d (one per core); use --bind-to %s:overload-allowed to have ranks share it, or --bind-to none",
			p, size, host, on, p.Unit, u, units[u].cores, p.Unit)
	}
	b.cpus, b.ranks = units[u].cpus, on
	b.what = fmt.Sprintf("%s %d (%s %s)", p.Unit, u, plural(len(b.cpus), "cpu"), cpuList(b.cpus))
	return b, nil
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
