package launch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// Go processors per rank (GOMAXPROCS). A Go rank's runtime runs Go code
// on as many threads as it has CPUs; with a rank on every core, the
// threads it has to spare (GC workers, idle processors spinning for work)
// take the cores of the ranks that poll for messages: on 16 cores at np
// 16 an 8-byte all-reduce took 17-55 us, against 1.5 us with GOMAXPROCS=2
// (issue #29). So, as torchrun sets OMP_NUM_THREADS=1, a rank whose user
// chose no GOMAXPROCS gets its share of the CPUs: those its host's starter
// may run on (runtime.NumCPU, which heeds the affinity mask: gorun here,
// the agent elsewhere) divided by the ranks of the host, at least 2; a
// rank bound to CPUs (--bind-to) gets the CPUs of its binding divided by
// the ranks bound to them. The starter decides, as it does the binding,
// because only the host knows its CPUs; the plan says whether the user
// chose (rankPlan.ShareProcs), and the launcher says so in one line.
// Programs not written in Go ignore the variable.

// shareProcs is the rule: the Go processors for each of ranks ranks that
// share cpus CPUs, cpus/ranks and at least 2; 0 when that is all of cpus,
// which Go would take anyway, so that GOMAXPROCS is left alone. Two, not
// one: a rank's non-blocking collectives run on a goroutine of their own,
// which must progress beside the computation that they overlap. On 16
// cores at np 16 (bench/manycore.sh), a step of examples/zero's MLP took
// 44-48 ms with GOMAXPROCS=1 against 26-29 with 2 (DDP's 43 against 37),
// while the collectives alone were as fast with 2 as with 1, both much
// faster than with 16. So a rank bound to one core gets 2 as well, more
// than its CPUs: bound to a core each at np 16, GOMAXPROCS=2 against 1
// (Go's own choice there), a ZeRO-3 step took 22.7-22.9 ms against
// 23.0-24.2, a 1 MiB all-gather 162 us against 213, and the slowest of
// 20,000 8-byte all-reduces 0.1-0.5 ms against 3.8-4.8.
//
// Ranks that reach each other over TCP alone (GORUN_TRANSPORT=tcp) get
// cpus/ranks and at least 1, the rule spmd.shareCores applies under other
// launchers: there every message wakes Go's netpoller, and a processor to
// spare runs a reader goroutine for it, a thread switch on the rank's
// cores. 2 ranks bound to the 2 cores of the development VM, 8-64 B
// all-reduces over TCP took 7.7-8.8 us with GOMAXPROCS=1 against 11-12
// with 2 (Open MPI over TCP 9.2-9.6, collbench, 2 alternating rounds), and
// examples/ddp over TCP ran 6,300-7,100 samples/s with 1 against
// 6,400-6,600 with 2, with 37-40% of its all-reduce hidden behind the
// backward pass against 13-17% (3 alternating runs).
func shareProcs(cpus, ranks int, tcp bool) int {
	least := 2
	if tcp {
		least = 1
	}
	n := max(least, cpus/max(1, ranks))
	if n == cpus {
		return 0
	}
	return n
}

// tcpOnly reports whether env makes a rank reach the others over TCP
// alone.
func tcpOnly(env []string) bool {
	v, _ := envValue(env, contract.EnvTransport)
	return v == "tcp"
}

// procsShare is a rank's share: procs Go processors (0: GOMAXPROCS left
// alone) for each of ranks ranks on cpus CPUs.
type procsShare struct {
	procs, cpus, ranks int
	bound              bool // cpus are the rank's binding, not the host's
}

// rankShare is the share of a rank with environment env (its
// GORUN_LOCAL_SIZE) and binding b, on a host whose starter may run on
// hostCPUs CPUs.
func rankShare(env []string, b binding, hostCPUs int) procsShare {
	tcp := tcpOnly(env)
	if b.cpus != nil {
		return procsShare{shareProcs(len(b.cpus), b.ranks, tcp), len(b.cpus), b.ranks, true}
	}
	v, _ := envValue(env, contract.EnvLocalSize)
	ranks, _ := strconv.Atoi(v)
	return procsShare{shareProcs(hostCPUs, ranks, tcp), hostCPUs, ranks, false}
}

// procsEnv is the environment a starter gives a rank: env, with
// GOMAXPROCS set to the rank's share when rp.ShareProcs and env sets none
// (an agent's own environment may).
func procsEnv(env []string, rp rankPlan, b binding, hostCPUs int) []string {
	if !rp.ShareProcs {
		return env
	}
	if v, _ := envValue(env, contract.EnvGoMaxProcs); v != "" {
		return env
	}
	s := rankShare(env, b, hostCPUs)
	if s.procs == 0 {
		return env
	}
	return append(slices.Clip(env), contract.EnvGoMaxProcs+"="+strconv.Itoa(s.procs))
}

// choseVar says whether the user chose name's value for a rank: in gorun's
// environment, or with -x for the job or for the rank's program, with a
// value or without one (gorun's value, or none).
func choseVar(name string, getenv func(string) string, xs ...[]string) bool {
	if getenv(name) != "" {
		return true
	}
	for _, list := range xs {
		for _, x := range list {
			if n, _, _ := strings.Cut(x, "="); n == name {
				return true
			}
		}
	}
	return false
}

// hostShares is what the starter of one host gives the ranks it shares
// processors among, as the launcher foresees it.
type hostShares struct {
	host   string
	here   bool         // the host is this machine
	shares []procsShare // of the ranks given a GOMAXPROCS
	// unknown says that the host's agent may give shares that the
	// launcher cannot foresee: it binds by CPUs only the host knows.
	unknown bool
}

// foreseeShares works out, per host of p in node order, the shares the
// starters will give. cpusOf returns a host's CPUs, its cores (another
// host's agent says both in ready) and whether the host is this machine;
// 0 CPUs: an agent that did not say, older than the rule, which sets
// none; 0 cores: one that did not say them. hostCPUs lists this machine's
// CPUs, which its ranks are bound among.
func foreseeShares(p *jobPlan, policy bindPolicy, cpusOf func(host string) (cpus, cores int, here bool), hostCPUs func() ([]cpuInfo, error)) []hostShares {
	hosts := make(map[string]*hostShares, len(p.Hosts))
	cpus, cores := make(map[string]int, len(p.Hosts)), make(map[string]int, len(p.Hosts))
	for _, h := range p.Hosts {
		n, c, here := cpusOf(h)
		hosts[h], cpus[h], cores[h] = &hostShares{host: h, here: here}, n, c
	}
	var inherited []string
	for _, rp := range p.Ranks {
		hs := hosts[rp.Host]
		if !rp.ShareProcs || cpus[rp.Host] == 0 || notGoProgram(p.Apps[rp.App].Program) {
			continue
		}
		b := binding{}
		switch {
		case policy.Unit == "auto" && !hs.here:
			// The host's agent binds a rank to each core where the host's
			// ranks are as many as its cores, as gorun does here: the
			// rank's share is then of its core's hardware threads.
			size, _ := envValue(rp.Env, contract.EnvLocalSize)
			if c := cores[rp.Host]; autoBindsOn(size, c) {
				b = binding{cpus: make([]int, max(1, cpus[rp.Host]/c)), ranks: 1}
			}
		case policy.Unit != "none" && !hs.here:
			// Bound, a rank's share counts the CPUs of its binding,
			// which only the host knows.
			hs.unknown = true
			continue
		case policy.Unit != "none":
			var err error
			if b, err = bindingFor(rp.Env, hostCPUs, rp.Host, p.Apps[rp.App].Program); err != nil {
				return nil // the job does not start (checkBindings)
			}
		}
		env := rp.Env
		if hs.here {
			// A rank started here has gorun's environment too, where
			// GORUN_TRANSPORT may be (agents pass on only the plan's).
			if inherited == nil {
				inherited = inheritedEnv()
			}
			env = append(slices.Clip(inherited), rp.Env...)
		}
		if s := rankShare(env, b, cpus[rp.Host]); s.procs > 0 {
			hs.shares = append(hs.shares, s)
		}
	}
	var out []hostShares
	for _, h := range p.Hosts {
		if hs := hosts[h]; len(hs.shares) > 0 || hs.unknown {
			out = append(out, *hs)
		}
	}
	return out
}

// procsNotice is the launcher's one line on the GOMAXPROCS the starters
// give the ranks, "" when they give none:
//
//	GOMAXPROCS=2 for each of 16 ranks on 16 CPUs of this host; set GOMAXPROCS to choose another
//
// It describes the first host, and counts the others, which their
// starters give a share of their own CPUs.
func procsNotice(hosts []hostShares) string {
	if len(hosts) == 0 {
		return ""
	}
	const tail = "; set GOMAXPROCS to choose another"
	i := slices.IndexFunc(hosts, func(h hostShares) bool { return len(h.shares) > 0 })
	if i < 0 {
		return fmt.Sprintf("GOMAXPROCS for each bound rank on %d %s: the CPUs of its binding divided by the ranks bound to them, at least 2%s",
			len(hosts), plural(len(hosts), "host"), tail)
	}
	h := hosts[i]
	lo, hi := h.shares[0].procs, h.shares[0].procs
	for _, s := range h.shares {
		lo, hi = min(lo, s.procs), max(hi, s.procs)
	}
	procs := strconv.Itoa(lo)
	if hi > lo {
		procs += " to " + strconv.Itoa(hi)
	}
	who := "1 rank"
	if n := len(h.shares); n > 1 {
		who = fmt.Sprintf("each of %d ranks", n)
	}
	where := "this host"
	if !h.here {
		where = "host " + h.host
	}
	s := h.shares[0]
	msg := fmt.Sprintf("GOMAXPROCS=%s for %s on %d CPUs of %s", procs, who, s.cpus, where)
	if s.bound {
		msg = fmt.Sprintf("GOMAXPROCS=%s for %s of %s, %d bound to %d %s", procs, who, where, s.ranks, s.cpus, plural(s.cpus, "CPU"))
		if s.ranks == 1 {
			each := "each "
			if len(h.shares) == 1 {
				each = ""
			}
			msg = fmt.Sprintf("GOMAXPROCS=%s for %s of %s, %sbound to %d %s of its own", procs, who, where, each, s.cpus, plural(s.cpus, "CPU"))
		}
	}
	if more := len(hosts) - 1; more > 0 {
		msg += fmt.Sprintf(", and likewise by their own CPUs on %d more %s", more, plural(more, "host"))
	}
	return msg + tail
}
