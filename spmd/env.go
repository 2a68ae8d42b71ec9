package spmd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// DefaultInitTimeout is how long Init waits for every rank to arrive when
// GORUN_INIT_TIMEOUT is not set.
const DefaultInitTimeout = contract.DefaultInitTimeout

// Env is the launcher's environment as a rank reads it.
type Env struct {
	Rank, Size           int
	LocalRank, LocalSize int
	NodeRank, NodeCount  int
	JobID                string
	Seeds                []string
	Rendezvous           string // GORUN_RENDEZVOUS: register there instead of gossiping to rendezvous
	HostID               string
	ProfileDir           string
	ProfileCPU           bool // GORUN_PROFILE_CPU=1
	StatusFD             int  // GORUN_STATUS_FD: where to report lost peers to gorun; 0: nowhere
	RestartCount         int  // GORUN_RESTART_COUNT: 0 on the job's first start
	MaxRestarts          int  // GORUN_MAX_RESTARTS
	Secret               []byte
	InitTimeout          time.Duration
	BindAddr             string
	Transport            string             // "", tcp or shm (GORUN_TRANSPORT)
	SingleCopy           int                // GORUN_SHM_SINGLE_COPY in bytes; -1 when unset (the transport's default)
	NoHugePages          bool               // GORUN_SHM_HUGEPAGES=0
	Ports                contract.PortRange // zero: any port
	Verbose              bool
}

// Launched reports whether the process was started by gorun (GORUN_RANK set)
// or, for torchrun-style launchers, RANK and WORLD_SIZE.
func Launched(getenv func(string) string) bool {
	return getenv(contract.EnvRank) != "" || getenv(contract.EnvTorchRank) != "" && getenv(contract.EnvTorchWorldSize) != ""
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
		{&e.Rank, []string{contract.EnvRank, contract.EnvTorchRank}, true},
		{&e.Size, []string{contract.EnvSize, contract.EnvTorchWorldSize}, true},
		{&e.LocalRank, []string{contract.EnvLocalRank, contract.EnvTorchLocalRank}, false},
		{&e.LocalSize, []string{contract.EnvLocalSize, contract.EnvTorchLocalWorld}, false},
		{&e.NodeRank, []string{contract.EnvNodeRank}, false},
		{&e.NodeCount, []string{contract.EnvNodeCount}, false},
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
		return e, fmt.Errorf("%s=%d with %s=%d: want 0 <= rank < size", contract.EnvRank, e.Rank, contract.EnvSize, e.Size)
	}
	if e.LocalSize == 0 {
		e.LocalSize = 1
	}
	if e.NodeCount == 0 {
		e.NodeCount = 1
	}
	e.JobID = getenv(contract.EnvJobID)
	if s := getenv(contract.EnvSeeds); s != "" {
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				e.Seeds = append(e.Seeds, a)
			}
		}
	}
	e.Rendezvous = getenv(contract.EnvRendezvous)
	e.HostID = getenv(contract.EnvHostID)
	e.ProfileDir = getenv(contract.EnvProfileDir)
	e.ProfileCPU = getenv(contract.EnvProfileCPU) == "1"
	if fd, err := strconv.Atoi(getenv(contract.EnvStatusFD)); err == nil && fd >= 3 {
		e.StatusFD = fd
	}
	e.RestartCount, _ = strconv.Atoi(getenv(contract.EnvRestartCount))
	e.MaxRestarts, _ = strconv.Atoi(getenv(contract.EnvMaxRestarts))
	e.BindAddr = getenv(contract.EnvBindAddr)
	e.Verbose = getenv(contract.EnvVerbose) == "1"
	switch e.Transport = getenv(contract.EnvTransport); e.Transport {
	case "", "tcp", "shm":
	default:
		return e, fmt.Errorf("%s=%q: want tcp or shm (or unset: shared memory between ranks of a host, TCP between hosts)", contract.EnvTransport, e.Transport)
	}
	if s := getenv(contract.EnvSingleCopy); s != "" {
		n, err := ParseSize(s)
		if err != nil {
			return e, fmt.Errorf("%s=%q: want a byte count such as 262144 or 256K, 0 or more (0 turns single copy off)", contract.EnvSingleCopy, s)
		}
		e.SingleCopy = n
	}
	if s := getenv(contract.EnvHugePages); s != "" {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return e, fmt.Errorf("%s=%q: want 1 or 0 (0: leave the pages of single-copy sends as they are)", contract.EnvHugePages, s)
		}
		e.NoHugePages = !on
	}
	if s := getenv(contract.EnvCheckColls); s != "" {
		// prims reads it; checked here, so that a check asked for in
		// other words ("yes") fails Init rather than stays off.
		if _, err := strconv.ParseBool(s); err != nil {
			return e, fmt.Errorf("%s=%q: want 1 or 0 (1: the ranks compare each collective call before it runs)", contract.EnvCheckColls, s)
		}
	}
	if s := getenv(contract.EnvPorts); s != "" {
		pr, err := contract.ParsePortRange(s)
		if err != nil {
			return e, fmt.Errorf("%s: %w", contract.EnvPorts, err)
		}
		e.Ports = pr
	}
	if s := getenv(contract.EnvInitTimeout); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return e, fmt.Errorf("%s=%q: want a positive duration such as 30s", contract.EnvInitTimeout, s)
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
