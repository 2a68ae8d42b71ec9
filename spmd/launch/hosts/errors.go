package hosts

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns matches one of them with
// errors.Is.
var (
	// ErrSyntax means a hostfile, host list or Slurm variable could not be
	// read. The error is a *ParseError or an *EnvError.
	ErrSyntax = errors.New("hosts: syntax error")

	// ErrTooLarge means an input would expand to more than MaxHosts hosts
	// (or tasks, or slots).
	ErrTooLarge = errors.New("hosts: expansion too large")

	// ErrNoHosts means Map was given an empty host list.
	ErrNoHosts = errors.New("hosts: no hosts")

	// ErrNotEnoughSlots means more ranks were requested than the hosts have
	// slots, without oversubscription. The error is a *SlotsError.
	ErrNotEnoughSlots = errors.New("hosts: not enough slots")

	// ErrMaxSlots means the ranks do not fit even when oversubscribing,
	// because every host is at its max_slots. The error is a *SlotsError.
	ErrMaxSlots = errors.New("hosts: max_slots reached")
)

// maxQuoted is how much of an offending line an error message quotes.
const maxQuoted = 120

// quote returns s quoted for an error message, shortened when long.
func quote(s string) string {
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// ParseError is a malformed line of a hostfile or entry of a host list.
// It matches ErrSyntax, or ErrTooLarge for counts beyond the limits.
type ParseError struct {
	File string // hostfile name, or "host list"
	Line int    // 1-based line number; 0 for a host list
	Text string // the offending line or entry
	Msg  string // what was wrong and what was expected
	Err  error  // ErrSyntax or ErrTooLarge
}

// Error formats as `hostfile.txt:7: "node1 slots=abc": slots must be ...`.
func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, quote(e.Text), e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, quote(e.Text), e.Msg)
}

// Unwrap returns the sentinel the error matches.
func (e *ParseError) Unwrap() error { return e.Err }

// EnvError is a malformed Slurm environment variable. It matches ErrSyntax,
// or ErrTooLarge for expansions beyond MaxHosts.
type EnvError struct {
	Var   string // e.g. SLURM_JOB_NODELIST
	Value string // the variable's value
	Msg   string // what was wrong
	Err   error  // ErrSyntax or ErrTooLarge
}

// Error formats as `SLURM_TASKS_PER_NODE="2(x": ...`.
func (e *EnvError) Error() string {
	return fmt.Sprintf("%s=%s: %s", e.Var, quote(e.Value), e.Msg)
}

// Unwrap returns the sentinel the error matches.
func (e *EnvError) Unwrap() error { return e.Err }

// SlotsError says that the requested ranks do not fit on the hosts. It
// matches ErrNotEnoughSlots or ErrMaxSlots.
type SlotsError struct {
	Requested int // ranks asked for
	Slots     int // slots (or max_slots when Err is ErrMaxSlots) available
	Hosts     int // hosts in the list
	Err       error
}

// Error says what was asked, what there is, and what to do.
func (e *SlotsError) Error() string {
	if errors.Is(e.Err, ErrMaxSlots) {
		return fmt.Sprintf("%d ranks requested but max_slots allows at most %d on %d %s; add hosts, or raise max_slots",
			e.Requested, e.Slots, e.Hosts, plural(e.Hosts, "host"))
	}
	return fmt.Sprintf("%d ranks requested but the host list has %d %s on %d %s; add slots, or pass --oversubscribe",
		e.Requested, e.Slots, plural(e.Slots, "slot"), e.Hosts, plural(e.Hosts, "host"))
}

// Unwrap returns the sentinel the error matches.
func (e *SlotsError) Unwrap() error { return e.Err }

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
