package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/gorun-hpc/gorun/spmd/launch/hosts"
)

// ErrUsage marks errors in what the user asked for: flags, config values,
// the config file. gorun exits with status 2 for them.
var ErrUsage = errors.New("usage error")

// kindError is an error of a kind (ErrUsage, errNotFound, ...) whose
// message does not repeat the kind.
type kindError struct {
	err  error
	kind error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// errorf formats an error that is also errors.Is kind.
func errorf(kind error, format string, args ...any) error {
	return &kindError{err: fmt.Errorf(format, args...), kind: kind}
}

// Config is everything a job is started with. Get one from DefaultConfig,
// decode a TOML file onto it with LoadTOML, let flags override fields, and
// call Validate before use. Program and Args come from the command line only.
type Config struct {
	NP              int      `toml:"np"`               // number of ranks
	Export          []string `toml:"export"`           // VAR or VAR=VAL for every rank (-x)
	TagOutput       bool     `toml:"tag_output"`       // prefix lines with [rank]
	TimestampOutput bool     `toml:"timestamp_output"` // prefix lines with the time
	OutputDir       string   `toml:"output_dir"`       // also write DIR/rank.N.out and .err
	Stdin           string   `toml:"stdin"`            // "none", "all" or a rank number
	Timeout         Duration `toml:"timeout"`          // stop the job after this long; 0: never
	KillGrace       Duration `toml:"kill_grace"`       // SIGTERM to SIGKILL
	InitTimeout     Duration `toml:"init_timeout"`     // GORUN_INIT_TIMEOUT for the ranks; 0: unset
	Wdir            string   `toml:"wdir"`             // working directory of the ranks
	ProfileDir      string   `toml:"profile"`          // GORUN_PROFILE_DIR for the ranks
	ProfileCPU      bool     `toml:"profile_cpu"`      // GORUN_PROFILE_CPU=1: CPU profiles too
	MaxRestarts     int      `toml:"max_restarts"`     // start the job again after a rank's failure, up to this many times

	apps     []App     // every context, the first included, once Run has counted them
	built    []bool    // by context: gorun built its program, into a temp dir of this machine
	restart  int       // which start of the job this is (GORUN_RESTART_COUNT)
	deadline time.Time // --timeout from the job's first start, over every restart
	runID    string    // the first start's job id: torchrun's run id, the same for every restart
	// origin is where a config file set a key that no flag replaced:
	// "FILE:LINE" by key, for the errors that judge it with others.
	origin  map[string]string
	flagged map[string]bool // the keys of the flags given (SetByFlag)
	Verbose bool            `toml:"verbose"` // log launch steps; GORUN_VERBOSE=1
	Quiet   bool            `toml:"quiet"`   // no notices of what gorun sets for the ranks
	DryRun  bool            `toml:"-"`       // print the plan, start nothing

	// Hosts and mapping.
	Hosts         string `toml:"hosts"`         // -H node1:2,node2:2
	Hostfile      string `toml:"hostfile"`      // --hostfile FILE
	MapBy         string `toml:"map_by"`        // slot (default) or node
	NPerNode      int    `toml:"npernode"`      // exactly N ranks per host
	Oversubscribe bool   `toml:"oversubscribe"` // more ranks than slots

	// Binding to CPUs.
	BindTo         string `toml:"bind_to"`         // auto (default), none, hwthread, core or socket[:overload-allowed]
	ReportBindings bool   `toml:"report_bindings"` // print each rank's binding
	TimerSlack     string `toml:"timer_slack"`     // auto (default), 0, or a duration: the ranks' timer slack

	// Remote start.
	SSHArgs        string   `toml:"ssh_args"`        // extra ssh arguments, split like a shell
	LaunchAgent    string   `toml:"launch_agent"`    // rsh-like command instead of ssh
	ConnectTimeout Duration `toml:"connect_timeout"` // per host, to reach its agent
	AgentTimeout   Duration `toml:"agent_timeout"`   // an agent that hears nothing from gorun this long stops its ranks; 0: never
	SpawnRadix     int      `toml:"spawn_radix"`     // agents started per agent
	Preload        bool     `toml:"preload"`         // copy gorun and the program to each host

	// Addresses.
	Iface string `toml:"iface"` // interface to bind on every host
	Net   string `toml:"net"`   // CIDR whose address to bind on every host
	Ports string `toml:"ports"` // LOW-HIGH for every listener

	Program string   `toml:"-"` // executable, name on PATH, or Go package directory
	Args    []string `toml:"-"` // the program's arguments
	// Apps are the program contexts after the first of an MPMD job, Open
	// MPI's gorun -np 1 ./server : -np 4 ./worker: each context's ranks
	// follow the earlier ones' in rank order. Empty for an SPMD job.
	Apps []App `toml:"-"`
}

// Duration is a time.Duration that reads and writes as "1m30s" in TOML.
type Duration time.Duration

// UnmarshalText parses a Go duration such as "90s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it like \"30s\" or \"5m\"", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// MaxRanks is the most ranks one job may have (hosts.MaxSlots, the most
// that hosts.Map places): more is refused before anything is allocated
// for them.
const MaxRanks = hosts.MaxSlots

// maxRanksPerCPU is how crowded a job on this machine alone may be
// without --oversubscribe: more ranks than this per CPU are a typo more
// often than a plan, and would take the machine's memory and processes.
const maxRanksPerCPU = 64

// Defaults of DefaultConfig.
const (
	DefaultKillGrace      = 5 * time.Second  // between SIGTERM and SIGKILL
	DefaultConnectTimeout = 10 * time.Second // to reach a host's agent
	DefaultAgentTimeout   = 30 * time.Second // an agent's wait for word from gorun
	DefaultSpawnRadix     = 32               // agents one agent starts
)

// DefaultConfig returns the configuration gorun starts from: stdin to rank 0,
// a kill grace of DefaultKillGrace, no timeout, mapping by slot, agents
// started DefaultSpawnRadix at a time. NP is 0: one rank per slot of a host
// list, and required without one.
func DefaultConfig() Config {
	return Config{
		Stdin: "0", KillGrace: Duration(DefaultKillGrace), MapBy: "slot",
		ConnectTimeout: Duration(DefaultConnectTimeout), AgentTimeout: Duration(DefaultAgentTimeout),
		SpawnRadix: DefaultSpawnRadix,
	}
}

// DefaultConfigPath is the config file read when --config is not given:
// $XDG_CONFIG_HOME/gorun/config.toml, else ~/.config/gorun/config.toml.
func DefaultConfigPath(getenv func(string) string) string {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "gorun", "config.toml")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "gorun", "config.toml")
	}
	return ""
}

// LoadTOML decodes the TOML file at path onto c. Unknown keys, values of
// the wrong type and values that their flag would refuse are errors that
// name path:line and wrap ErrUsage.
func (c *Config) LoadTOML(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return errorf(ErrUsage, "config: %w", err)
	}
	return c.DecodeTOML(path, b)
}

// DecodeTOML is LoadTOML on the bytes of a file; name is used in errors.
func (c *Config) DecodeTOML(name string, b []byte) error {
	keys := topKeys(b)
	if err := checkDurations(name, keys); err != nil {
		return err
	}
	dec := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields()
	err := dec.Decode(c)
	if err == nil {
		if c.origin == nil {
			c.origin = map[string]string{}
		}
		for _, k := range keys {
			c.origin[k.key] = name + ":" + strconv.Itoa(k.line)
		}
		return c.checkValues(name, keys)
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		e := &strict.Errors[0]
		line, _ := e.Position()
		key := strings.Join(e.Key(), ".")
		if k := strings.ReplaceAll(key, "-", "_"); k != key && configKind(k) != "" {
			return errorf(ErrUsage, "%s:%d: unknown key %q: did you mean %s? (a config's keys are the flags' names with _ for -)", name, line, key, k)
		}
		return errorf(ErrUsage, "%s:%d: unknown key %q: see FILES in gorun(1) for the keys a config may set", name, line, key)
	}
	var derr *toml.DecodeError
	if errors.As(err, &derr) {
		line, _ := derr.Position()
		what := strings.TrimPrefix(derr.Error(), "toml: ")
		if i := strings.Index(what, "into struct field"); i >= 0 {
			what = what[:i] + "into " + strings.Join(derr.Key(), ".")
		}
		if want := configKind(strings.Join(derr.Key(), ".")); want != "" && strings.HasPrefix(what, "cannot decode") {
			what += ", which wants " + want
		}
		return errorf(ErrUsage, "%s:%d: %s: fix the file or pass another with --config", name, line, what)
	}
	return errorf(ErrUsage, "%s: %v: fix the file or pass another with --config", name, err)
}

// App is one program context of an MPMD job after the first.
type App struct {
	NP      int
	Program string
	Args    []string
	Export  []string // -x for this context's ranks, over the job's
}

// contexts returns every program context of the job, the first (NP,
// Program, Args) included.
func (c *Config) contexts() []App {
	if c.apps != nil {
		return c.apps
	}
	return []App{{NP: c.NP, Program: c.Program, Args: c.Args}}
}

// countApps fixes the contexts of an MPMD job and makes NP their total;
// an SPMD job keeps its NP (0 may still mean one rank per slot).
func (c *Config) countApps() error {
	if len(c.Apps) == 0 {
		return nil
	}
	switch {
	case c.NP == 0 && c.Hosts == "" && c.Hostfile == "":
		return errorf(ErrUsage, "program 1 of the MPMD job: how many ranks of %s? give -np N before it, as in gorun -np 1 %s : -np 4 %s", c.Program, c.Program, c.Apps[0].Program)
	case c.NP == 0:
		return errorf(ErrUsage, "program 1 of the MPMD job: no -np before %s: every program of an MPMD job (PROG : -np N PROG2) needs its -np", c.Program)
	case c.NP < 1:
		return errorf(ErrUsage, "-np %d before %s: every program of an MPMD job (PROG : -np N PROG2) needs its -np", c.NP, c.Program)
	}
	c.apps = append([]App{{NP: c.NP, Program: c.Program, Args: c.Args}}, c.Apps...)
	total := 0
	for i, a := range c.apps {
		switch {
		case a.Program == "":
			return errorf(ErrUsage, "program %d of the MPMD job: no program after its -np %d", i+1, a.NP)
		case a.NP < 1:
			return errorf(ErrUsage, "program %d of the MPMD job (%s): -np %d: want at least 1 rank", i+1, a.Program, a.NP)
		case a.NP > MaxRanks:
			return errorf(ErrUsage, "program %d of the MPMD job (%s): -np %d: at most %d ranks in one job", i+1, a.Program, a.NP, MaxRanks)
		case a.NP > MaxRanks-total: // total <= MaxRanks: no overflow
			return errorf(ErrUsage, "program %d of the MPMD job (%s): -np %d: the programs' ranks add up to more than %d, the most one job may have", i+1, a.Program, a.NP, MaxRanks)
		}
		total += a.NP
	}
	c.NP = total
	return nil
}

// Validate reports the first thing wrong with c, wrapping ErrUsage. NP 0
// is left for Run to judge: with a host list it means one rank per slot.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return errorf(ErrUsage, format, args...)
	}
	if c.Hosts != "" && c.Hostfile != "" {
		return bad("-H and --hostfile both given: use one host list")
	}
	for _, v := range valueChecks {
		if err := v.check(c); err != nil {
			return bad("%s %v", v.flag, err)
		}
	}
	if c.Iface != "" && c.Net != "" {
		return bad("--iface and --net both given: pick the address one way")
	}
	if c.ProfileCPU && c.ProfileDir == "" {
		return bad("%s needs --profile DIR (profile in a config file): the CPU profiles go beside the trace files", c.named("--profile-cpu"))
	}
	if c.Program == "" {
		return bad("no program to run: give one after the flags, as in gorun -np %d ./prog", c.NP)
	}
	if _, err := c.StdinRank(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// SetByFlag records that the command line's flag (as in "profile-cpu")
// replaced what a config file gave its key (profile_cpu).
func (c *Config) SetByFlag(flag string) {
	key := strings.ReplaceAll(flag, "-", "_")
	delete(c.origin, key)
	if c.flagged == nil {
		c.flagged = map[string]bool{}
	}
	c.flagged[key] = true
}

// given says whether a flag or a config file gave key's setting, for the
// settings whose zero value also means "left out".
func (c *Config) given(key string) bool {
	_, inFile := c.origin[key]
	return inFile || c.flagged[key]
}

// named is how an error names the value of flag (as in "--stdin"): the
// flag, or FILE:LINE and the key where a config file set it.
func (c *Config) named(flag string) string {
	key := strings.ReplaceAll(strings.TrimLeft(flag, "-"), "-", "_")
	if at, ok := c.origin[key]; ok {
		return at + ": " + key
	}
	return flag
}

// checkValues runs valueChecks for the keys the config file name sets
// (topKeys), now decoded onto c, and reports the first bad one by its
// line.
func (c *Config) checkValues(name string, keys []fileKey) error {
	line := map[string]int{}
	for _, k := range keys {
		line[k.key] = k.line
	}
	// Pairs that Validate refuses as two flags, here as two keys.
	for _, pair := range [][2]string{{"hosts", "hostfile"}, {"iface", "net"}} {
		if a, b := line[pair[0]], line[pair[1]]; a > 0 && b > 0 {
			return errorf(ErrUsage, "%s:%d: %s and %s both set (lines %d and %d): keep one; a flag on the command line replaces either", name, max(a, b), pair[0], pair[1], a, b)
		}
	}
	for _, k := range keys {
		for _, v := range valueChecks {
			if v.key != k.key {
				continue
			}
			if err := v.check(c); err != nil {
				return errorf(ErrUsage, "%s:%d: %s %v: fix the file or pass another with --config", name, k.line, k.key, err)
			}
		}
	}
	return nil
}

// Stdin targets returned by StdinRank besides a rank number.
const (
	stdinNone = -1 // no rank reads gorun's stdin; ranks get /dev/null
	StdinAll  = -2 // every rank gets a copy of gorun's stdin
)

// StdinRank decodes c.Stdin: a rank number, stdinNone or StdinAll.
func (c *Config) StdinRank() (int, error) {
	switch c.Stdin {
	case "none":
		return stdinNone, nil
	case "all":
		return StdinAll, nil
	case "":
		return 0, nil
	}
	n, err := strconv.Atoi(c.Stdin)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want none, all, or a rank number", c.named("--stdin"), c.Stdin)
	}
	if c.NP > 0 && n >= c.NP {
		if c.NP == 1 {
			return 0, fmt.Errorf("%s %d: there is only 1 rank (0)", c.named("--stdin"), n)
		}
		return 0, fmt.Errorf("%s %d: there are only %d ranks (0..%d)", c.named("--stdin"), n, c.NP, c.NP-1)
	}
	return n, nil
}
