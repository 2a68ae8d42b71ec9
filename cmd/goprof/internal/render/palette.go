package render

import (
	"hash/fnv"
	"strings"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// regionColors colour compute regions by nesting depth, outermost first;
// deeper regions take the last.
var regionColors = [...]string{"#2e7d32", "#43a047", "#66bb6a", "#81c784", "#a5d6a7"}

// opColors are the collectives' colours, by operation name.
var opColors = map[string]string{
	"allreduce":     "#1f5fbf",
	"broadcast":     "#7b1fa2",
	"reduce":        "#00897b",
	"allgather":     "#f57c00",
	"reducescatter": "#afb42b",
	"alltoall":      "#6d4c41",
	"barrier":       "#455a64",
	"gather":        "#c2185b",
	"scatter":       "#5c6bc0",
}

// otherColors are for collectives opColors does not name, picked by a
// hash of the name so that an operation keeps its colour.
var otherColors = [...]string{"#26c6da", "#8d6e63", "#d4e157", "#ec407a", "#7e57c2"}

// The colours of point-to-point calls, of the two kinds of waiting, and
// of the missing ranks' lanes.
const (
	sendColor    = "#29b6f6"
	recvColor    = "#ffca28"
	waitColor    = "#9e9e9e"
	lateColor    = "#e53935"
	missingColor = "#bdbdbd"
)

// regionColor returns the colour of a region at depth d.
func regionColor(d int) string { return regionColors[min(max(d, 0), len(regionColors)-1)] }

// opColor returns the colour of collective operation op.
func opColor(op string) string {
	if c, ok := opColors[op]; ok {
		return c
	}
	h := fnv.New32a()
	h.Write([]byte(op))
	return otherColors[h.Sum32()%uint32(len(otherColors))]
}

// style is how one event is drawn: the class that names its kind, its
// colour and the name people read.
type style struct {
	class, color, name string
}

// styleOf returns the style of e, a region at depth depth.
func styleOf(j *job.Job, e *trace.Event, depth int) style {
	switch e.Kind {
	case trace.RegionEvent:
		name := j.Str(e.Name)
		if name == "" {
			name = "region"
		}
		return style{"region", regionColor(depth), name}
	case trace.CollectiveEvent:
		op := j.Str(e.Name)
		return style{"op-" + classSafe(op), opColor(op), opName(j, e)}
	case trace.SendEvent:
		return style{"send", sendColor, opName(j, e)}
	case trace.RecvEvent:
		return style{"recv", recvColor, opName(j, e)}
	case trace.WaitEvent:
		return style{"wait", waitColor, opName(j, e)}
	}
	return style{classSafe(e.Kind.String()), waitColor, e.Kind.String()}
}

// opName is the name of a call as report.OpName has it (allreduce,
// isend, wait, with an i for the non-blocking ones); a collective whose
// name is missing is "collective".
func opName(j *job.Job, e *trace.Event) string {
	if e.Kind == trace.CollectiveEvent && j.Str(e.Name) == "" {
		if e.Flags&trace.NonBlocking != 0 {
			return "icollective"
		}
		return "collective"
	}
	return report.OpName(j, e)
}

// classSafe makes s usable in a class attribute: lower-case letters,
// digits and dashes.
func classSafe(s string) string {
	if s == "" {
		return "unnamed"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}
