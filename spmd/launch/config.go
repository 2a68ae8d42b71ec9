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
)

// ErrUsage marks errors in what the user asked for: flags, config values,
// the config file. gorun exits with status 2 for them.
var ErrUsage = errors.New("usage error")

// kindError is an error of a kind (ErrUsage, ErrNotFound, ...) whose
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
	Verbose         bool     `toml:"verbose"`          // log launch steps; GORUN_VERBOSE=1
	DryRun          bool     `toml:"-"`                // print the plan, start nothing

	Program string   `toml:"-"` // executable, name on PATH, or Go package directory
	Args    []string `toml:"-"` // the program's arguments
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

// DefaultKillGrace is how long ranks get between SIGTERM and SIGKILL.
const DefaultKillGrace = 5 * time.Second

// DefaultConfig returns the configuration gorun starts from: stdin to rank 0,
// a kill grace of DefaultKillGrace, no timeout. NP is 0 and must be set.
func DefaultConfig() Config {
	return Config{Stdin: "0", KillGrace: Duration(DefaultKillGrace)}
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

// LoadTOML decodes the TOML file at path onto c. Unknown keys and values of
// the wrong type are errors that name path:line and wrap ErrUsage.
func (c *Config) LoadTOML(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return errorf(ErrUsage, "config: %w", err)
	}
	return c.DecodeTOML(path, b)
}

// DecodeTOML is LoadTOML on the bytes of a file; name is used in errors.
func (c *Config) DecodeTOML(name string, b []byte) error {
	dec := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields()
	err := dec.Decode(c)
	if err == nil {
		return nil
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		e := &strict.Errors[0]
		line, _ := e.Position()
		return errorf(ErrUsage, "%s:%d: unknown key %q: see FILES in gorun(1) for the keys a config may set", name, line, strings.Join(e.Key(), "."))
	}
	var derr *toml.DecodeError
	if errors.As(err, &derr) {
		line, _ := derr.Position()
		what := strings.TrimPrefix(derr.Error(), "toml: ")
		if i := strings.Index(what, "into struct field"); i >= 0 {
			what = what[:i] + "into " + strings.Join(derr.Key(), ".")
		}
		return errorf(ErrUsage, "%s:%d: %s: fix the file or pass another with --config", name, line, what)
	}
	return errorf(ErrUsage, "%s: %v: fix the file or pass another with --config", name, err)
}

// Validate reports the first thing wrong with c, wrapping ErrUsage.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return errorf(ErrUsage, format, args...)
	}
	if c.NP < 1 {
		return bad("-np %d: want at least 1 rank, as in gorun -np 4 %s", c.NP, c.Program)
	}
	if c.Program == "" {
		return bad("no program to run: give one after the flags, as in gorun -np %d ./prog", c.NP)
	}
	if _, err := c.StdinRank(); err != nil {
		return bad("%v", err)
	}
	if c.Timeout < 0 || c.KillGrace < 0 || c.InitTimeout < 0 {
		return bad("durations must not be negative (timeout %v, kill grace %v, init timeout %v)",
			time.Duration(c.Timeout), time.Duration(c.KillGrace), time.Duration(c.InitTimeout))
	}
	for _, x := range c.Export {
		name, _, _ := strings.Cut(x, "=")
		if name == "" || strings.ContainsAny(name, " \t\n") {
			return bad("-x %q: want VAR or VAR=VALUE", x)
		}
		if isContractVar(name) {
			return bad("-x %s: gorun sets %s for each rank itself", name, name)
		}
	}
	return nil
}

// Stdin targets returned by StdinRank besides a rank number.
const (
	StdinNone = -1 // no rank reads gorun's stdin; ranks get /dev/null
	StdinAll  = -2 // every rank gets a copy of gorun's stdin
)

// StdinRank decodes c.Stdin: a rank number, StdinNone or StdinAll.
func (c *Config) StdinRank() (int, error) {
	switch c.Stdin {
	case "none":
		return StdinNone, nil
	case "all":
		return StdinAll, nil
	case "":
		return 0, nil
	}
	n, err := strconv.Atoi(c.Stdin)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--stdin %q: want none, all, or a rank number", c.Stdin)
	}
	if c.NP > 0 && n >= c.NP {
		return 0, fmt.Errorf("--stdin %d: there are only %d ranks (0..%d)", n, c.NP, c.NP-1)
	}
	return n, nil
}
