package hosts

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Limits on what the parsers accept, so that hostile input cannot make them
// allocate without bound.
const (
	MaxHosts = 100000  // hosts in one list, entries in one Slurm expansion
	MaxSlots = 1 << 20 // slots on one host (after merging), and ranks in one Map
)

// maxNameLen is the longest host name accepted.
const maxNameLen = 255

// Host is one machine a job can run on.
type Host struct {
	Name     string // the name the user wrote; identifies the host
	User     string // login for ssh; empty for the current user
	Addr     string // what to ssh to; empty means Name
	Slots    int    // ranks it takes before it is oversubscribed
	MaxSlots int    // ranks it takes at most, even oversubscribed; 0: no limit
	Line     int    // line of the hostfile it was (first) read from; 0 if none
}

// Destination returns the ssh destination: [user@]addr, with Addr falling
// back to Name.
func (h Host) Destination() string {
	addr := h.Addr
	if addr == "" {
		addr = h.Name
	}
	if h.User != "" {
		return h.User + "@" + addr
	}
	return addr
}

// String formats the host as a hostfile line, e.g. "user@node1 slots=4 max_slots=8".
func (h Host) String() string {
	var b strings.Builder
	if h.User != "" {
		b.WriteString(h.User + "@")
	}
	b.WriteString(h.Name)
	fmt.Fprintf(&b, " slots=%d", h.Slots)
	if h.MaxSlots > 0 {
		fmt.Fprintf(&b, " max_slots=%d", h.MaxSlots)
	}
	return b.String()
}

// list accumulates hosts in first-seen order and merges repeated names.
type list struct {
	hosts []Host
	index map[string]int // protects nothing; name -> position in hosts
}

// add merges h into the list. It returns a message (not an error) on
// conflict, so the caller can wrap it with its position.
func (l *list) add(h Host) (msg string, tooLarge bool) {
	if l.index == nil {
		l.index = make(map[string]int)
	}
	i, ok := l.index[h.Name]
	if !ok {
		if len(l.hosts) >= MaxHosts {
			return fmt.Sprintf("more than %d hosts", MaxHosts), true
		}
		l.index[h.Name] = len(l.hosts)
		l.hosts = append(l.hosts, h)
		return "", false
	}
	old := &l.hosts[i]
	if h.User != "" && old.User != "" && h.User != old.User {
		return fmt.Sprintf("%s is listed again with user %q but was listed with user %q%s; use one user per host",
			h.Name, h.User, old.User, lineRef(old.Line)), false
	}
	if old.Slots+h.Slots > MaxSlots {
		return fmt.Sprintf("%s has more than %d slots in all", h.Name, MaxSlots), true
	}
	if old.User == "" {
		old.User = h.User
	}
	// Each line contributes its capacity: a line without max_slots makes
	// the merged host unlimited.
	if old.MaxSlots == 0 || h.MaxSlots == 0 {
		old.MaxSlots = 0
	} else {
		old.MaxSlots += h.MaxSlots
	}
	old.Slots += h.Slots
	return "", false
}

func lineRef(line int) string {
	if line == 0 {
		return ""
	}
	return fmt.Sprintf(" on line %d", line)
}

// parseDest splits "[user@]name[:count]" (or "[user@][v6addr][:count]", or a
// bare IPv6 address). count is 0 when absent.
func parseDest(tok string) (user, name string, count int, msg string) {
	if at := strings.IndexByte(tok, '@'); at >= 0 {
		user, tok = tok[:at], tok[at+1:]
		if !validUser(user) {
			return "", "", 0, "the user before @ must be a login name (e.g. alice@node1)"
		}
	}
	var countText string
	hasCount := false
	switch {
	case strings.HasPrefix(tok, "["):
		end := strings.IndexByte(tok, ']')
		if end < 0 {
			return "", "", 0, "missing ] after an IPv6 address (e.g. [fe80::1]:4)"
		}
		name, rest := tok[1:end], tok[end+1:]
		if a, err := netip.ParseAddr(name); err != nil || !a.Is6() {
			return "", "", 0, "a host name in [] must be an IPv6 address (e.g. [fe80::1]:4)"
		}
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", "", 0, "expected :count after ] (e.g. [fe80::1]:4)"
			}
			countText, hasCount = rest[1:], true
		}
		tok = name
	case strings.Count(tok, ":") == 1:
		c := strings.IndexByte(tok, ':')
		tok, countText, hasCount = tok[:c], tok[c+1:], true
	case strings.Count(tok, ":") > 1:
		if a, err := netip.ParseAddr(tok); err != nil || !a.Is6() {
			return "", "", 0, "expected host:count (e.g. node1:4); write an IPv6 address with a count as [fe80::1]:4"
		}
	}
	if !validName(tok) {
		return "", "", 0, "a host name must be letters, digits, '.', '-' or '_', not starting with '-' (e.g. node1)"
	}
	if hasCount {
		n, ok := parseCount(countText)
		if !ok {
			return "", "", 0, badCount(countText, "the count after :", "a positive whole number (e.g. node1:4)")
		}
		count = n
	}
	return user, tok, count, ""
}

// parseCount parses a positive decimal count no larger than MaxSlots.
func parseCount(s string) (int, bool) {
	if s == "" || len(s) > 8 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxSlots {
		return 0, false
	}
	return n, true
}

// badCount says what is wrong with a count parseCount refused, named
// what: too large, or else not want.
func badCount(s, what, want string) string {
	if s != "" && strings.Trim(s, "0123456789") == "" && strings.Trim(s, "0") != "" {
		return fmt.Sprintf("%s %s is more than %d, the most slots one host may have", what, s, MaxSlots)
	}
	return what + " must be " + want
}

// validName accepts host names (letters, digits, '.', '-', '_'), IPv4 and
// IPv6 addresses (with a zone). It refuses a leading '-' so that a name can
// never be read as an ssh option.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen || s[0] == '-' || s[0] == '.' {
		return false
	}
	if strings.ContainsAny(s, ":%") {
		a, err := netip.ParseAddr(s)
		return err == nil && a.Is6()
	}
	return plainName(s)
}

// validUser accepts POSIX-ish login names.
func validUser(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' {
		return false
	}
	return plainName(s)
}

// plainName reports whether s holds only letters, digits, '-', '.' and '_'.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}
