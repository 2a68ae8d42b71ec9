package contract

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The launcher-to-rank contract: the environment gorun (or its agent) gives
// every rank. gorun(1) lists each variable under ENVIRONMENT.
// DefaultInitTimeout is how long spmd.Init waits for every rank to arrive
// where GORUN_INIT_TIMEOUT is unset (gorun --init-timeout left out).
const DefaultInitTimeout = 60 * time.Second

const (
	EnvRank           = "GORUN_RANK"              // this rank, 0..size-1
	EnvSize           = "GORUN_SIZE"              // number of ranks in the job
	EnvLocalRank      = "GORUN_LOCAL_RANK"        // rank among the ranks of this host
	EnvLocalSize      = "GORUN_LOCAL_SIZE"        // number of ranks on this host
	EnvNodeRank       = "GORUN_NODE_RANK"         // index of this host among the job's hosts
	EnvNodeCount      = "GORUN_NODE_COUNT"        // number of hosts in the job
	EnvJobID          = "GORUN_JOB_ID"            // job id; labels the gossip
	EnvSeeds          = "GORUN_SEEDS"             // comma-separated gossip seed addresses
	EnvRendezvous     = "GORUN_RENDEZVOUS"        // the launcher's rendezvous "ip:port" (net/rendezvous)
	EnvHostID         = "GORUN_HOST_ID"           // host identity; overrides hostname+boot id
	EnvProfileDir     = "GORUN_PROFILE_DIR"       // where to write trace files (profiling on)
	EnvProfileCPU     = "GORUN_PROFILE_CPU"       // "1": each rank also writes its CPU profile to the profile directory
	EnvSecretFD       = "GORUN_SECRET_FD"         // fd to read the per-job secret from (hex, one line)
	EnvSecret         = "GORUN_SECRET"            // the per-job secret in hex, when no fd can be passed
	EnvStatusFD       = "GORUN_STATUS_FD"         // fd a rank writes "lost R" lines to, for each peer it lost (gorun names the first failure by them)
	EnvInitTimeout    = "GORUN_INIT_TIMEOUT"      // how long Init waits for every rank (Go duration)
	EnvBindAddr       = "GORUN_BIND_ADDR"         // IP that gossip and data plane listen on
	EnvPorts          = "GORUN_PORTS"             // LOW-HIGH: TCP/UDP ports listeners may use
	EnvVerbose        = "GORUN_VERBOSE"           // "1": log rendezvous and connection steps to stderr
	EnvTransport      = "GORUN_TRANSPORT"         // force a transport: tcp, shm
	EnvAlgo           = "GORUN_ALGO"              // force a collective algorithm
	EnvTuneFile       = "GORUN_TUNE_FILE"         // the decision tables of gorun --tune (default $XDG_CACHE_HOME/gorun/tune.toml)
	EnvSingleCopy     = "GORUN_SHM_SINGLE_COPY"   // smallest shared-memory message sent by single copy; 0: never
	EnvHugePages      = "GORUN_SHM_HUGEPAGES"     // 0: do not collapse memory sent from by single copy into huge pages
	EnvCheckColls     = "GORUN_CHECK_COLLECTIVES" // 1: the ranks compare each collective call before it runs (prims)
	EnvBindTo         = "GORUN_BIND_TO"           // how the rank was bound to CPUs: none, hwthread, core or socket (--bind-to); to a starter, unset is auto
	EnvReportBindings = "GORUN_REPORT_BINDINGS"   // "1": the starter reports each rank's binding (--report-bindings)
	EnvHostCPUs       = "GORUN_HOST_CPUS"         // the CPUs the ranks of this host share: those its starter may run on, even where each rank is bound to some
	EnvTimerSlack     = "GORUN_TIMER_SLACK"       // to a starter, the timer slack to give the rank (--timer-slack): a duration, 0 for none; unset is auto
	EnvRestartCount   = "GORUN_RESTART_COUNT"     // which start of the job this is: 0, then 1, 2, ... after failures (--max-restarts)
	EnvMaxRestarts    = "GORUN_MAX_RESTARTS"      // how many times gorun starts the job again after a failure (--max-restarts)

	// The names torchrun sets, for programs written against it.
	EnvTorchRank       = "RANK"
	EnvTorchWorldSize  = "WORLD_SIZE"
	EnvTorchLocalRank  = "LOCAL_RANK"
	EnvTorchLocalWorld = "LOCAL_WORLD_SIZE"
	EnvMasterAddr      = "MASTER_ADDR"
	EnvMasterPort      = "MASTER_PORT"
	// torchrun's elastic names: one worker group per host, one role.
	EnvTorchGroupRank  = "GROUP_RANK"                 // the host's node rank
	EnvTorchGroupSize  = "GROUP_WORLD_SIZE"           // the number of hosts
	EnvTorchRoleRank   = "ROLE_RANK"                  // the rank
	EnvTorchRoleSize   = "ROLE_WORLD_SIZE"            // the number of ranks
	EnvTorchRoleName   = "ROLE_NAME"                  // the role, torchrun's "default"
	EnvTorchRunID      = "TORCHELASTIC_RUN_ID"        // the job id
	EnvTorchRestarts   = "TORCHELASTIC_RESTART_COUNT" // 0: gorun does not restart jobs
	EnvTorchMaxRestart = "TORCHELASTIC_MAX_RESTARTS"  // 0
	EnvOMPThreads      = "OMP_NUM_THREADS"            // 1 when ranks share a host and the user set none

	// Go's own: the rank's share of its CPUs, when ranks share them and
	// the user set none (set by the starter of the rank's host).
	EnvGoMaxProcs = "GOMAXPROCS"
)

// PortRange is the ports listeners may bind, Low to High inclusive
// (GORUN_PORTS, gorun --ports). The zero value means any port.
type PortRange struct{ Low, High int }

// ParsePortRange reads "LOW-HIGH" (or one port "N").
func ParsePortRange(s string) (PortRange, error) {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		hi = lo
	}
	l, err1 := strconv.Atoi(strings.TrimSpace(lo))
	h, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || l < 1 || h > 65535 || l > h {
		return PortRange{}, fmt.Errorf("%q: want LOW-HIGH with 1 <= LOW <= HIGH <= 65535, as in 40000-40100", s)
	}
	return PortRange{l, h}, nil
}

// String formats r as LOW-HIGH; "" for the zero range.
func (r PortRange) String() string {
	if r.Low == 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.Low, r.High)
}

// Try calls bind with ports of r, starting at a random one, until bind
// returns an error other than "address already in use", and returns that
// result. For the zero range it calls bind(0) once: any port.
func (r PortRange) Try(bind func(port int) error) error {
	if r.Low == 0 {
		return bind(0)
	}
	n := r.High - r.Low + 1
	start := rand.IntN(n)
	var err error
	for i := range n {
		err = bind(r.Low + (start+i)%n)
		if !inUse(err) {
			return err
		}
	}
	return fmt.Errorf("every port in %s is in use: widen the range (%s, which gorun --ports sets): %w", r, EnvPorts, err)
}

// inUse reports whether err says that the address was taken; memberlist
// formats its errors with %v, hence the text match.
func inUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
}

// LocalHostID returns this machine's identity: its hostname and the first
// eight characters of the kernel's boot id, so that two machines (or two
// network-namespace hosts of a test) that share a hostname but not a kernel
// boot still differ. GORUN_HOST_ID overrides it for ranks; launchers that
// know better (Slurm's node name, a hostfile entry) set that. It is read
// once per process: prims asks for it at every new communicator's first
// collective, where reading the files took a sixth of a Dup, all-reduce
// and Free (120 us at np 2).
func LocalHostID() string { return localHostID() }

var localHostID = sync.OnceValue(func() string {
	return hostnameWith("/proc/sys/kernel/random/boot_id")
})

// MachineName returns a name for this machine that outlives a reboot, for
// what is kept across jobs (gorun --tune's tables): its hostname, a colon
// and the first eight characters of its machine id (/etc/machine-id), or
// the hostname alone where there is none. LocalHostID holds the boot id
// instead, which differs after every reboot. It is read once per process,
// as LocalHostID is.
func MachineName() string { return machineName() }

var machineName = sync.OnceValue(func() string {
	return hostnameWith("/etc/machine-id", "/var/lib/dbus/machine-id")
})

// hostnameWith returns the hostname ("localhost" where it has none), a
// colon and the first eight characters of the first of files that holds
// an id of eight or more, or the hostname alone where none does.
func hostnameWith(files ...string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if id := strings.TrimSpace(string(b)); err == nil && len(id) >= 8 {
			return host + ":" + id[:8]
		}
	}
	return host
}

// RankList names ranks as the launcher and the ranks both say them: "rank
// 3", or "ranks 1, 2, 5" with at most 16 numbers and then "... (40 in
// all)".
func RankList(rs []int) string {
	var b strings.Builder
	if len(rs) == 1 {
		b.WriteString("rank ")
	} else {
		b.WriteString("ranks ")
	}
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 16 {
			fmt.Fprintf(&b, "... (%d in all)", len(rs))
			break
		}
		b.WriteString(strconv.Itoa(r))
	}
	return b.String()
}

// HostCPUs returns how many CPUs the ranks of this host share:
// GORUN_HOST_CPUS, which the starter of the host's ranks sets to the CPUs
// it may run on, or, for a rank started otherwise, those this process may
// run on. A rank bound to one CPU (--bind-to core) sees one CPU of its
// own: counting that, 16 ranks bound to the 16 cores of a host took the
// host for one with 16 ranks on one core, and polled and chose their
// algorithms as such a host asks.
func HostCPUs() int {
	if n, err := strconv.Atoi(os.Getenv(EnvHostCPUs)); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}
