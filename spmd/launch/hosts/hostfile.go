package hosts

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxLine is the longest hostfile line read.
const maxLine = 64 << 10

// ParseHostfile reads a hostfile. name is used in error messages only. The
// format is detected line by line, so files may mix:
//
//	# Open MPI / DeepSpeed
//	node1 slots=4 max_slots=8
//	alice@node2            # one slot
//	node3 count=2          # count= (or cpu=) is a synonym of slots=
//	# MPICH / Intel MPI
//	node4:4
//
// Keys are slots (count, cpu), max_slots (max-slots, slots_max) and user
// (username); spaces around '=' are allowed. A host listed twice has the
// sum of its slots; a malformed line gives a *ParseError naming the file and
// line. An empty file gives an empty list and no error.
func ParseHostfile(name string, r io.Reader) ([]Host, error) {
	var l list
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		raw := sc.Text()
		text := raw
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		fail := func(msg string, err error) error {
			return &ParseError{File: name, Line: n, Text: strings.TrimSpace(raw), Msg: msg, Err: err}
		}
		h, msg := parseLine(text)
		if msg != "" {
			return nil, fail(msg, ErrSyntax)
		}
		h.Line = n
		if msg, big := l.add(h); msg != "" {
			return nil, fail(msg, sentinel(big))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &ParseError{File: name, Line: n + 1, Text: "", Msg: fmt.Sprintf("line longer than %d bytes", maxLine), Err: ErrTooLarge}
		}
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return l.hosts, nil
}

func sentinel(tooLarge bool) error {
	if tooLarge {
		return ErrTooLarge
	}
	return ErrSyntax
}

// parseLine reads one hostfile line without its comment. It returns a
// message saying what was expected when the line is malformed.
func parseLine(text string) (Host, string) {
	fields := joinEquals(strings.Fields(text))
	user, name, count, msg := parseDest(fields[0])
	if msg != "" {
		return Host{}, msg
	}
	h := Host{Name: name, User: user, Slots: count}
	for _, f := range fields[1:] {
		if msg := h.setOption(f, count > 0); msg != "" {
			return Host{}, msg
		}
	}
	if h.Slots == 0 {
		h.Slots = 1
	}
	if h.MaxSlots > 0 && h.MaxSlots < h.Slots {
		return Host{}, fmt.Sprintf("max_slots=%d is less than slots=%d; max_slots must be at least slots", h.MaxSlots, h.Slots)
	}
	return h, ""
}

// setOption applies one key=value option to h. colonCount says whether the
// host token already carried a count (node1:4).
func (h *Host) setOption(f string, colonCount bool) string {
	key, val, ok := strings.Cut(f, "=")
	if !ok || key == "" {
		return fmt.Sprintf("expected key=value after the host name, got %s (e.g. node1 slots=4)", quote(f))
	}
	switch strings.ToLower(key) {
	case "slots", "count", "cpu", "cpus":
		if h.Slots > 0 {
			if colonCount {
				return "the slot count is given twice, as host:N and as " + key + "=; keep one"
			}
			return "the slot count is given twice; keep one of slots=, count=, cpu="
		}
		n, ok := parseCount(val)
		if !ok {
			return badCount(val, key, "a positive whole number (e.g. node1 slots=4)")
		}
		h.Slots = n
	case "max_slots", "max-slots", "slots_max", "slots-max":
		if h.MaxSlots > 0 {
			return "max_slots is given twice; keep one"
		}
		n, ok := parseCount(val)
		if !ok {
			return badCount(val, key, "a positive whole number (e.g. node1 slots=4 max_slots=8)")
		}
		h.MaxSlots = n
	case "user", "username":
		if h.User != "" && h.User != val {
			return "the user is given twice; keep one of user@host and " + key + "="
		}
		if !validUser(val) {
			return key + " must be a login name (e.g. node1 user=alice)"
		}
		h.User = val
	default:
		return fmt.Sprintf("unknown key %s; expected slots=, count=, max_slots= or user=", quote(key))
	}
	return ""
}

// joinEquals glues "slots", "=", "4" and "slots=", "4" back into "slots=4".
// The first field (the host) is never joined.
func joinEquals(fields []string) []string {
	out := fields[:1]
	for _, f := range fields[1:] {
		last := len(out) - 1
		if last > 0 && (strings.HasSuffix(out[last], "=") || strings.HasPrefix(f, "=")) {
			out[last] += f
			continue
		}
		out = append(out, f)
	}
	return out
}

// ParseHostList reads a host list as given to -H: comma-separated
// [user@]host[:slots] entries, e.g. "node1:2,node2:2,node3". A host without a
// count has one slot; a host named twice has the sum of its slots. Spaces
// around entries are ignored; an empty entry is an error.
func ParseHostList(s string) ([]Host, error) {
	var l list
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		fail := func(msg string, err error) error {
			return &ParseError{File: "host list", Text: entry, Msg: msg, Err: err}
		}
		if entry == "" {
			return nil, &ParseError{File: "host list", Text: s, Msg: "empty entry; expected host[:slots] separated by commas (e.g. node1:2,node2)", Err: ErrSyntax}
		}
		user, name, count, msg := parseDest(entry)
		if msg != "" {
			return nil, fail(msg, ErrSyntax)
		}
		if count == 0 {
			count = 1
		}
		if msg, big := l.add(Host{Name: name, User: user, Slots: count}); msg != "" {
			return nil, fail(msg, sentinel(big))
		}
	}
	return l.hosts, nil
}
