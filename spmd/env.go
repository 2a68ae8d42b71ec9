package spmd

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The launcher-to-rank contract: the environment gorun (or its agent) gives
// every rank. gorun(1) lists each variable under ENVIRONMENT.
const (
	EnvRank           = "GORUN_RANK"            // this rank, 0..size-1
	EnvSize           = "GORUN_SIZE"            // number of ranks in the job
	EnvLocalRank      = "GORUN_LOCAL_RANK"      // rank among the ranks of this host
	EnvLocalSize      = "GORUN_LOCAL_SIZE"      // number of ranks on this host
	EnvNodeRank       = "GORUN_NODE_RANK"       // index of this host among the job's hosts
	EnvNodeCount      = "GORUN_NODE_COUNT"      // number of hosts in the job
	EnvJobID          = "GORUN_JOB_ID"          // job id; labels the gossip
	EnvSeeds          = "GORUN_SEEDS"           // comma-separated gossip seed addresses
	EnvHostID         = "GORUN_HOST_ID"         // host identity; overrides hostname+boot id
	EnvProfileDir     = "GORUN_PROFILE_DIR"     // where to write trace files (profiling on)
	EnvProfileCPU     = "GORUN_PROFILE_CPU"     // "1": each rank also writes its CPU profile to the profile directory
	EnvSecretFD       = "GORUN_SECRET_FD"       // fd to read the per-job secret from (hex, one line)
	EnvSecret         = "GORUN_SECRET"          // the per-job secret in hex, when no fd can be passed
	EnvInitTimeout    = "GORUN_INIT_TIMEOUT"    // how long Init waits for every rank (Go duration)
	EnvBindAddr       = "GORUN_BIND_ADDR"       // IP that gossip and data plane listen on
	EnvPorts          = "GORUN_PORTS"           // LOW-HIGH: TCP/UDP ports listeners may use
	EnvVerbose        = "GORUN_VERBOSE"         // "1": log rendezvous and connection steps to stderr
	EnvTransport      = "GORUN_TRANSPORT"       // force a transport: tcp, shm
	EnvAlgo           = "GORUN_ALGO"            // force a collective algorithm
	EnvSingleCopy     = "GORUN_SHM_SINGLE_COPY" // smallest shared-memory message sent by single copy; 0: never
	EnvHugePages      = "GORUN_SHM_HUGEPAGES"   // 0: do not collapse memory sent from by single copy into huge pages
	EnvBindTo         = "GORUN_BIND_TO"         // how the rank was bound to CPUs: none, hwthread, core or socket (--bind-to)
	EnvReportBindings = "GORUN_REPORT_BINDINGS" // "1": the starter reports each rank's binding (--report-bindings)
	EnvRestartCount   = "GORUN_RESTART_COUNT"   // which start of the job this is: 0, then 1, 2, ... after failures (--max-restarts)
	EnvMaxRestarts    = "GORUN_MAX_RESTARTS"    // how many times gorun starts the job again after a failure (--max-restarts)

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
	EnvTorchRunID      = "TORCHELASTIC_RUN_ID"        // the job id
	EnvTorchRestarts   = "TORCHELASTIC_RESTART_COUNT" // 0: gorun does not restart jobs
	EnvTorchMaxRestart = "TORCHELASTIC_MAX_RESTARTS"  // 0
	EnvOMPThreads      = "OMP_NUM_THREADS"            // 1 when ranks share a host and the user set none
)

// DefaultInitTimeout is how long Init waits for every rank to arrive when
// GORUN_INIT_TIMEOUT is not set.
const DefaultInitTimeout = 60 * time.Second

// Env is the launcher's environment as a rank reads it.
type Env struct {
	Rank, Size           int
	LocalRank, LocalSize int
	NodeRank, NodeCount  int
	JobID                string
	Seeds                []string
	HostID               string
	ProfileDir           string
	ProfileCPU           bool // GORUN_PROFILE_CPU=1
	RestartCount         int  // GORUN_RESTART_COUNT: 0 on the job's first start
	MaxRestarts          int  // GORUN_MAX_RESTARTS
	Secret               []byte
	InitTimeout          time.Duration
	BindAddr             string
	Transport            string    // "", tcp or shm (GORUN_TRANSPORT)
	SingleCopy           int       // GORUN_SHM_SINGLE_COPY in bytes; -1 when unset (the transport's default)
	NoHugePages          bool      // GORUN_SHM_HUGEPAGES=0
	Ports                PortRange // zero: any port
	Verbose              bool
}

// Launched reports whether the process was started by gorun (GORUN_RANK set)
// or, for torchrun-style launchers, RANK and WORLD_SIZE.
func Launched(getenv func(string) string) bool {
	return getenv(EnvRank) != "" || getenv(EnvTorchRank) != "" && getenv(EnvTorchWorldSize) != ""
}

// ReadEnv parses the launcher's environment through getenv (os.Getenv in
// production). Errors name the variable and the value that was wrong. The
// secret itself is read by Init, not here.
func ReadEnv(getenv func(string) string) (Env, error) {
	e := Env{InitTimeout: DefaultInitTimeout, SingleCopy: -1}
	ints := []struct {
		dst      *int
		names    []string
		required bool
	}{
		{&e.Rank, []string{EnvRank, EnvTorchRank}, true},
		{&e.Size, []string{EnvSize, EnvTorchWorldSize}, true},
		{&e.LocalRank, []string{EnvLocalRank, EnvTorchLocalRank}, false},
		{&e.LocalSize, []string{EnvLocalSize, EnvTorchLocalWorld}, false},
		{&e.NodeRank, []string{EnvNodeRank}, false},
		{&e.NodeCount, []string{EnvNodeCount}, false},
	}
	for _, v := range ints {
		name, val := first(getenv, v.names)
		if val == "" {
			if v.required {
				return e, fmt.Errorf("%s is not set: start the program with gorun, or run it alone", v.names[0])
			}
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return e, fmt.Errorf("%s=%q: want a whole number >= 0", name, val)
		}
		*v.dst = n
	}
	if e.Size < 1 || e.Rank >= e.Size {
		return e, fmt.Errorf("%s=%d with %s=%d: want 0 <= rank < size", EnvRank, e.Rank, EnvSize, e.Size)
	}
	if e.LocalSize == 0 {
		e.LocalSize = 1
	}
	if e.NodeCount == 0 {
		e.NodeCount = 1
	}
	e.JobID = getenv(EnvJobID)
	if s := getenv(EnvSeeds); s != "" {
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				e.Seeds = append(e.Seeds, a)
			}
		}
	}
	e.HostID = getenv(EnvHostID)
	e.ProfileDir = getenv(EnvProfileDir)
	e.ProfileCPU = getenv(EnvProfileCPU) == "1"
	e.RestartCount, _ = strconv.Atoi(getenv(EnvRestartCount))
	e.MaxRestarts, _ = strconv.Atoi(getenv(EnvMaxRestarts))
	e.BindAddr = getenv(EnvBindAddr)
	e.Verbose = getenv(EnvVerbose) == "1"
	switch e.Transport = getenv(EnvTransport); e.Transport {
	case "", "tcp", "shm":
	default:
		return e, fmt.Errorf("%s=%q: want tcp or shm (or unset: shared memory between ranks of a host, TCP between hosts)", EnvTransport, e.Transport)
	}
	if s := getenv(EnvSingleCopy); s != "" {
		n, err := ParseSize(s)
		if err != nil {
			return e, fmt.Errorf("%s=%q: want a byte count such as 262144 or 256K, 0 or more (0 turns single copy off)", EnvSingleCopy, s)
		}
		e.SingleCopy = n
	}
	if s := getenv(EnvHugePages); s != "" {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return e, fmt.Errorf("%s=%q: want 1 or 0 (0: leave the pages of single-copy sends as they are)", EnvHugePages, s)
		}
		e.NoHugePages = !on
	}
	if s := getenv(EnvPorts); s != "" {
		pr, err := ParsePortRange(s)
		if err != nil {
			return e, fmt.Errorf("%s: %w", EnvPorts, err)
		}
		e.Ports = pr
	}
	if s := getenv(EnvInitTimeout); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return e, fmt.Errorf("%s=%q: want a positive duration such as 30s", EnvInitTimeout, s)
		}
		e.InitTimeout = d
	}
	return e, nil
}

func first(getenv func(string) string, names []string) (string, string) {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return n, v
		}
	}
	return names[0], ""
}

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
	return fmt.Errorf("every port in %s is in use: widen the range (%s): %w", r, EnvPorts, err)
}

// inUse reports whether err says that the address was taken; memberlist
// formats its errors with %v, hence the text match.
func inUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
}
