package prims

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/topo"
)

// The decision tables that gorun --tune measures and later jobs load, as
// Open MPI's dynamic rules files and FFTW's wisdom: per key (the hosts,
// the ranks on each, the transport), per collective, the algorithm that
// was measured fastest from each size on. This file reads, checks and
// writes them; tuned.go looks them up for a communicator.

// TuneVersion is the version of the decision-table file that this gorun
// reads and writes.
const TuneVersion = 1

// maxSteps bounds the steps of one rule: sizes measured by factors of two
// from 1 B to 1 TiB make 41.
const maxSteps = 64

// ErrTuneFile is wrapped by the errors of a decision-table file that
// cannot be used: unreadable, not TOML, or not a valid table.
var ErrTuneFile = errors.New("bad decision-table file")

// TuneFile is a decision-table file: one table per key.
type TuneFile struct {
	Version int         `toml:"version" comment:"gorun decision tables, written by gorun --tune; see gorun(1)"`
	Tables  []TuneTable `toml:"table"`
}

// TuneKey is what a table was measured on, and which communicators it
// decides for: those whose ranks sit on the hosts of these identities
// (GORUN_HOST_ID, in the order of their lowest rank) with these many ranks
// on each, over this transport (tuneTransport).
type TuneKey struct {
	Hosts     []string `toml:"hosts" json:"hosts"`
	PerHost   []int    `toml:"ranks_per_host" json:"ranks_per_host"`
	Transport string   `toml:"transport" json:"transport"`
}

// TuneTable is the decisions measured for one key.
type TuneTable struct {
	TuneKey
	MeasuredOn string     `toml:"measured_on"`
	MeasuredAt time.Time  `toml:"measured_at"`
	Rules      []TuneRule `toml:"rule"`
}

// TuneRule is the decisions for one collective: Steps[i].Algo from
// Steps[i].From bytes (counted as Choose counts them) up to the next
// step's From; the first step's algorithm below it too, the last one's
// beyond it.
type TuneRule struct {
	Collective string     `toml:"collective"`
	Steps      []TuneStep `toml:"steps,inline" multiline:"true"`
}

// TuneStep is one step of a rule.
type TuneStep struct {
	From int    `toml:"from"`
	Algo string `toml:"algo"`
}

// String formats the key for people and error messages.
func (k TuneKey) String() string {
	return fmt.Sprintf("hosts %s, ranks per host %v, transport %s", strings.Join(k.Hosts, ","), k.PerHost, k.Transport)
}

// Equal reports whether k and o name the same communicators.
func (k TuneKey) Equal(o TuneKey) bool {
	return slices.Equal(k.Hosts, o.Hosts) && slices.Equal(k.PerHost, o.PerHost) && k.Transport == o.Transport
}

// Ranks returns the number of ranks of the key's communicators.
func (k TuneKey) Ranks() int {
	n := 0
	for _, r := range k.PerHost {
		n += r
	}
	return n
}

// TuneFilePath returns the decision-table file of this process:
// GORUN_TUNE_FILE when set, else gorun/tune.toml under the user's cache
// directory ($XDG_CACHE_HOME, else ~/.cache); "" when there is none, or
// GORUN_TUNE_FILE is "none" (the model alone chooses, as bench/choice.sh
// wants).
func TuneFilePath() string {
	if p := os.Getenv(contract.EnvTuneFile); p == "none" {
		return ""
	} else if p != "" {
		return p
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "gorun", "tune.toml")
}

// ParseTuneFile decodes and checks a decision-table file; name says where
// it came from in errors, which wrap ErrTuneFile.
func ParseTuneFile(name string, data []byte) (*TuneFile, error) {
	var f TuneFile
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			e := sm.Errors[0]
			row, col := e.Position()
			return nil, fmt.Errorf("%w %s:%d:%d: unknown key %s", ErrTuneFile, name, row, col, strings.Join(e.Key(), "."))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%w %s:%d:%d: %v", ErrTuneFile, name, row, col, de)
		}
		return nil, fmt.Errorf("%w %s: %v", ErrTuneFile, name, err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%w %s: %v (run gorun --tune again, or remove the file)", ErrTuneFile, name, err)
	}
	return &f, nil
}

// ReadTuneFile reads and checks the decision-table file at path.
func ReadTuneFile(path string) (*TuneFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTuneFile, err)
	}
	return ParseTuneFile(path, data)
}

// Validate checks the file: its version, each table's key, and each
// rule's collective, algorithms (known, implementing the collective) and
// sizes (from 0, strictly increasing). Errors name the entry.
func (f *TuneFile) Validate() error {
	if f.Version != TuneVersion {
		return fmt.Errorf("version %d, this gorun reads version %d", f.Version, TuneVersion)
	}
	for i, t := range f.Tables {
		if err := t.validate(); err != nil {
			return fmt.Errorf("table %d (%s): %w", i+1, t.TuneKey, err)
		}
		for j := range i {
			if f.Tables[j].TuneKey.Equal(t.TuneKey) {
				return fmt.Errorf("tables %d and %d have the same key (%s)", j+1, i+1, t.TuneKey)
			}
		}
	}
	return nil
}

func (t TuneTable) validate() error {
	if len(t.Hosts) == 0 || len(t.Hosts) != len(t.PerHost) {
		return fmt.Errorf("%d hosts and %d ranks_per_host: want one count per host", len(t.Hosts), len(t.PerHost))
	}
	for _, n := range t.PerHost {
		if n < 1 {
			return fmt.Errorf("ranks_per_host %v: want at least 1 on each host", t.PerHost)
		}
	}
	seen := map[topo.Collective]bool{}
	for _, r := range t.Rules {
		coll, err := topo.ParseCollective(r.Collective)
		if err != nil {
			return fmt.Errorf("rule: %w", err)
		}
		if seen[coll] {
			return fmt.Errorf("two rules for %s", coll)
		}
		seen[coll] = true
		if len(r.Steps) == 0 || len(r.Steps) > maxSteps {
			return fmt.Errorf("%s: %d steps, want 1 to %d", coll, len(r.Steps), maxSteps)
		}
		for i, s := range r.Steps {
			a, err := topo.ParseAlgo(s.Algo)
			if err != nil {
				return fmt.Errorf("%s from %d: %w", coll, s.From, err)
			}
			if !Applies(coll, a) {
				return fmt.Errorf("%s from %d: %s does not implement %s (use one of %s)", coll, s.From, a, coll, algoNames(coll))
			}
			if s.From < 0 || i > 0 && s.From <= r.Steps[i-1].From {
				return fmt.Errorf("%s: sizes %v are not increasing from 0 or more", coll, stepSizes(r.Steps))
			}
		}
	}
	return nil
}

func stepSizes(steps []TuneStep) []int {
	s := make([]int, len(steps))
	for i, st := range steps {
		s[i] = st.From
	}
	return s
}

// Lookup returns the table for key, or nil.
func (f *TuneFile) Lookup(key TuneKey) *TuneTable {
	for i := range f.Tables {
		if f.Tables[i].TuneKey.Equal(key) {
			return &f.Tables[i]
		}
	}
	return nil
}

// Put adds t to f, replacing the table of the same key.
func (f *TuneFile) Put(t TuneTable) {
	for i := range f.Tables {
		if f.Tables[i].TuneKey.Equal(t.TuneKey) {
			f.Tables[i] = t
			return
		}
	}
	f.Tables = append(f.Tables, t)
}

// SaveTuneTable puts t into the decision-table file at path, keeping the
// tables of other keys already there, and writes it atomically (a
// temporary file renamed over it), making its directory if need be. A file
// that cannot be read as a decision table is an error, not overwritten.
func SaveTuneTable(path string, t TuneTable) error {
	f := &TuneFile{Version: TuneVersion}
	if data, err := os.ReadFile(path); err == nil {
		old, err := ParseTuneFile(path, data)
		if err != nil {
			return fmt.Errorf("%w; not overwriting it: move it away or set %s to another file", err, contract.EnvTuneFile)
		}
		f = old
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading the decision tables: %w", err)
	}
	f.Put(t)
	if err := f.Validate(); err != nil {
		return fmt.Errorf("decision table for %s: %w", t.TuneKey, err)
	}
	data, err := toml.Marshal(f)
	if err != nil {
		return fmt.Errorf("encoding the decision tables: %w", err)
	}
	if err := writeAtomic(path, ".tune-*.toml", data); err != nil {
		return fmt.Errorf("writing the decision tables to %s: %w", path, err)
	}
	return nil
}

// SaveTuneReport writes r to path as JSON (gorun --tune-json), atomically
// as SaveTuneTable writes the tables.
func SaveTuneReport(path string, r TuneReport) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the tuning report: %w", err)
	}
	if err := writeAtomic(path, ".tune-*.json", append(data, '\n')); err != nil {
		return fmt.Errorf("writing the tuning report to %s: %w", path, err)
	}
	return nil
}

// writeAtomic writes data to path through a temporary file (named by
// pattern, as os.CreateTemp takes it) in its directory, made if need be,
// and renamed over it: a reader finds the old file or the whole new one,
// and a failed write leaves neither half of one nor the temporary file.
func writeAtomic(path, pattern string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
