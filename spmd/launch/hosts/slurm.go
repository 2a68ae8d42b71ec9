package hosts

import (
	"fmt"
	"strconv"
	"strings"
)

// The Slurm variables FromSlurm reads.
const (
	EnvSlurmNodeList     = "SLURM_JOB_NODELIST"
	EnvSlurmNodeListOld  = "SLURM_NODELIST" // older name, read when the first is unset
	EnvSlurmTasksPerNode = "SLURM_TASKS_PER_NODE"
	EnvSlurmCPUsPerNode  = "SLURM_JOB_CPUS_PER_NODE" // read when SLURM_TASKS_PER_NODE is unset or the step's
	EnvSlurmCPUsPerTask  = "SLURM_CPUS_PER_TASK"     // divides SLURM_JOB_CPUS_PER_NODE into tasks
	EnvSlurmStepID       = "SLURM_STEP_ID"           // set inside a step that srun started
	EnvSlurmStepNumTasks = "SLURM_STEP_NUM_TASKS"
	EnvSlurmStepTasks    = "SLURM_STEP_TASKS_PER_NODE"
)

// FromSlurm returns the hosts of the Slurm allocation the process runs in,
// with one slot per task Slurm allotted each node. ok is false, with no
// error, outside Slurm (SLURM_JOB_NODELIST and SLURM_NODELIST unset). Slots
// come from the variable that [SlotsVar] names: SLURM_TASKS_PER_NODE, else
// SLURM_JOB_CPUS_PER_NODE divided by SLURM_CPUS_PER_TASK (at least one),
// else one per node. getenv is usually os.Getenv.
func FromSlurm(getenv func(string) string) (hosts []Host, ok bool, err error) {
	nodeVar := EnvSlurmNodeList
	nodeVal := getenv(nodeVar)
	if nodeVal == "" {
		nodeVar = EnvSlurmNodeListOld
		nodeVal = getenv(nodeVar)
	}
	if nodeVal == "" {
		return nil, false, nil
	}
	names, err := parseNodeList(nodeVar, nodeVal)
	if err != nil {
		return nil, true, err
	}
	counts := make([]int, len(names))
	for i := range counts {
		counts[i] = 1
	}
	if v := SlotsVar(getenv); v != "" {
		val := getenv(v)
		if counts, err = parseTasksPerNode(v, val); err != nil {
			return nil, true, err
		}
		if len(counts) != len(names) {
			return nil, true, &EnvError{Var: v, Value: val, Err: ErrSyntax,
				Msg: fmt.Sprintf("gives counts for %d nodes but %s lists %d nodes", len(counts), nodeVar, len(names))}
		}
		if v == EnvSlurmCPUsPerNode {
			if err := perTask(getenv, counts); err != nil {
				return nil, true, err
			}
		}
	}
	var l list
	for i, name := range names {
		if msg, big := l.add(Host{Name: name, Slots: counts[i]}); msg != "" {
			return nil, true, &EnvError{Var: nodeVar, Value: nodeVal, Msg: msg, Err: sentinel(big)}
		}
	}
	return l.hosts, true, nil
}

// SlotsVar names the variable that holds the slots of the Slurm allocation's
// nodes, "" where none does (one slot per node): SLURM_TASKS_PER_NODE,
// the tasks Slurm allotted each node, unless it is unset or is a step's.
// Then SLURM_JOB_CPUS_PER_NODE, where set. A process that srun started as
// the one task of a step (srun -n1 gorun, as srun -n1 mpirun) sees the
// job's nodes and CPUs, but srun sets SLURM_TASKS_PER_NODE (and
// SLURM_NTASKS) to the step's one task, as it does SLURM_STEP_TASKS_PER_NODE,
// and the job's tasks per node are nowhere in its environment; with
// srun --preserve-env the two differ, and SLURM_TASKS_PER_NODE is the
// job's.
func SlotsVar(getenv func(string) string) string {
	tasks := getenv(EnvSlurmTasksPerNode)
	if tasks != "" && !(StepOfOne(getenv) && tasks == getenv(EnvSlurmStepTasks)) {
		return EnvSlurmTasksPerNode
	}
	if getenv(EnvSlurmCPUsPerNode) != "" {
		return EnvSlurmCPUsPerNode
	}
	return ""
}

// StepOfOne reports whether the process runs as the one task of a Slurm
// step that srun started (SLURM_STEP_ID set, SLURM_STEP_NUM_TASKS 1).
func StepOfOne(getenv func(string) string) bool {
	return getenv(EnvSlurmStepID) != "" && getenv(EnvSlurmStepNumTasks) == "1"
}

// perTask divides the CPU counts of SLURM_JOB_CPUS_PER_NODE into tasks of
// SLURM_CPUS_PER_TASK CPUs each (salloc -c), at least one per node.
func perTask(getenv func(string) string, counts []int) error {
	val := getenv(EnvSlurmCPUsPerTask)
	if val == "" {
		return nil
	}
	per, ok := parseCount(val)
	if !ok {
		return &EnvError{Var: EnvSlurmCPUsPerTask, Value: val, Err: ErrSyntax, Msg: "want a positive number of CPUs"}
	}
	for i, c := range counts {
		counts[i] = max(1, c/per)
	}
	return nil
}

// ParseNodeList expands a Slurm node list as found in SLURM_JOB_NODELIST:
// "n[01-04,07],gpu[1-2]" gives n01 n02 n03 n04 n07 gpu1 gpu2. Zero padding
// is kept (the width of a range is the width of its first bound). Several
// bracket groups in one name expand to their cartesian product, leftmost
// slowest, as scontrol does: "rack[1-2]-n[1-2]" gives rack1-n1 rack1-n2
// rack2-n1 rack2-n2. More than MaxHosts names is an error matching
// ErrTooLarge. Errors are *EnvError values naming SLURM_JOB_NODELIST.
func ParseNodeList(s string) ([]string, error) {
	return parseNodeList(EnvSlurmNodeList, s)
}

func parseNodeList(varName, s string) ([]string, error) {
	fail := func(msg string, err error) error {
		return &EnvError{Var: varName, Value: s, Msg: msg, Err: err}
	}
	if strings.TrimSpace(s) == "" {
		return nil, fail("empty node list; expected names like n[01-04],gpu1", ErrSyntax)
	}
	items, msg := splitTop(s)
	if msg != "" {
		return nil, fail(msg, ErrSyntax)
	}
	var names []string
	for _, item := range items {
		p, msg := parsePattern(item)
		if msg != "" {
			return nil, fail(msg, ErrSyntax)
		}
		if p.maxLen() > maxNameLen {
			return nil, fail(fmt.Sprintf("%s makes node names longer than %d bytes", quote(item), maxNameLen), ErrSyntax)
		}
		n := p.size()
		if n < 0 || n > MaxHosts-len(names) {
			return nil, fail(fmt.Sprintf("expands to more than %d nodes", MaxHosts), ErrTooLarge)
		}
		names = p.expand(names)
	}
	for _, name := range names {
		if !validName(name) {
			return nil, fail(fmt.Sprintf("node name %s: names must be letters, digits, '.', '-' or '_', not starting with '-'", quote(name)), ErrSyntax)
		}
	}
	return names, nil
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) ([]string, string) {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return nil, "nested [ inside a bracket group; expected ranges like n[1-4,7]"
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, "] without a matching ["
			}
			depth--
		case ',':
			if depth == 0 {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, "missing ] at the end of a bracket group"
	}
	items = append(items, s[start:])
	for _, it := range items {
		if strings.TrimSpace(it) == "" {
			return nil, "empty name between commas"
		}
	}
	return items, ""
}

// span is one range of a bracket group: lo..hi printed width digits wide.
type span struct{ lo, hi, width int }

// pattern is a node name with bracket groups: lits[0] g[0] lits[1] g[1] ... lits[n].
type pattern struct {
	lits   []string
	groups [][]span
}

func parsePattern(item string) (pattern, string) {
	var p pattern
	rest := item
	for {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			p.lits = append(p.lits, rest)
			return p, ""
		}
		end := strings.IndexByte(rest, ']') // splitTop checked the nesting
		p.lits = append(p.lits, rest[:open])
		g, msg := parseGroup(rest[open+1 : end])
		if msg != "" {
			return p, msg
		}
		p.groups = append(p.groups, g)
		rest = rest[end+1:]
	}
}

func parseGroup(text string) ([]span, string) {
	if text == "" {
		return nil, "empty brackets; expected ranges like n[1-4,7]"
	}
	var g []span
	for _, r := range strings.Split(text, ",") {
		loText, hiText, isRange := strings.Cut(r, "-")
		lo, ok1 := parseIndex(loText)
		hi, ok2 := lo, true
		if isRange {
			hi, ok2 = parseIndex(hiText)
		}
		if !ok1 || !ok2 {
			return nil, fmt.Sprintf("bad range %s; expected numbers like 1-4 or 07", quote(r))
		}
		if hi < lo {
			return nil, fmt.Sprintf("range %s runs backwards; write the smaller number first", quote(r))
		}
		if hi-lo >= MaxHosts {
			return nil, fmt.Sprintf("range %s has more than %d entries", quote(r), MaxHosts)
		}
		g = append(g, span{lo: lo, hi: hi, width: len(loText)})
	}
	return g, ""
}

// parseIndex parses a bracket number of at most 9 digits.
func parseIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// size is the number of names p expands to, or -1 beyond MaxHosts.
func (p pattern) size() int {
	total := 1
	for _, g := range p.groups {
		n := 0
		for _, sp := range g {
			n += sp.hi - sp.lo + 1
			if n > MaxHosts {
				return -1
			}
		}
		total *= n
		if total > MaxHosts {
			return -1
		}
	}
	return total
}

// maxLen is the length of p's longest name.
func (p pattern) maxLen() int {
	n := 0
	for _, l := range p.lits {
		n += len(l)
	}
	for _, g := range p.groups {
		w := 0
		for _, sp := range g {
			w = max(w, sp.width, len(strconv.Itoa(sp.hi)))
		}
		n += w
	}
	return n
}

// expand appends p's names to out, leftmost group slowest.
func (p pattern) expand(out []string) []string {
	buf := make([]byte, 0, p.maxLen())
	var rec func(i int, buf []byte)
	rec = func(i int, buf []byte) {
		buf = append(buf, p.lits[i]...)
		if i == len(p.groups) {
			out = append(out, string(buf))
			return
		}
		for _, sp := range p.groups[i] {
			for v := sp.lo; v <= sp.hi; v++ {
				rec(i+1, appendPadded(buf, v, sp.width))
			}
		}
	}
	rec(0, buf)
	return out
}

// appendPadded appends v in decimal, zero-padded to width digits.
func appendPadded(buf []byte, v, width int) []byte {
	digits := strconv.Itoa(v)
	for i := len(digits); i < width; i++ {
		buf = append(buf, '0')
	}
	return append(buf, digits...)
}

// ParseTasksPerNode expands a Slurm per-node count list as found in
// SLURM_TASKS_PER_NODE: "2(x3),1" gives 2 2 2 1. Errors are *EnvError values
// naming SLURM_TASKS_PER_NODE; more than MaxHosts entries matches ErrTooLarge.
func ParseTasksPerNode(s string) ([]int, error) {
	return parseTasksPerNode(EnvSlurmTasksPerNode, s)
}

func parseTasksPerNode(varName, s string) ([]int, error) {
	fail := func(msg string, err error) error {
		return &EnvError{Var: varName, Value: s, Msg: msg, Err: err}
	}
	if strings.TrimSpace(s) == "" {
		return nil, fail("empty; expected counts like 2(x3),1", ErrSyntax)
	}
	var out []int
	for _, item := range strings.Split(s, ",") {
		countText, rep, hasRep := strings.Cut(item, "(")
		n, ok := parseCount(countText)
		if !ok {
			return nil, fail(fmt.Sprintf("bad count %s; expected a positive number, optionally repeated as 2(x3)", quote(item)), ErrSyntax)
		}
		times := 1
		if hasRep {
			inner, closed := strings.CutSuffix(rep, ")")
			inner, hasX := strings.CutPrefix(inner, "x")
			t, ok := parseIndex(inner)
			if !closed || !hasX || !ok || t < 1 {
				return nil, fail(fmt.Sprintf("bad repeat %s; expected count(xN) like 2(x3)", quote(item)), ErrSyntax)
			}
			times = t
		}
		if times > MaxHosts-len(out) {
			return nil, fail(fmt.Sprintf("expands to more than %d nodes", MaxHosts), ErrTooLarge)
		}
		for range times {
			out = append(out, n)
		}
	}
	return out, nil
}
