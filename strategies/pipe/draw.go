package pipe

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Draw writes the schedule as a table of time slots by stage, as the
// figures of the GPipe, 1F1B (PipeDream-Flush) and Megatron interleaving
// papers draw it: one row per rank, one column per time slot of the
// simulation with unit costs (forward 1, backward 2 slots, as the heading
// says), an op written in its slots, idle slots as dots. An op is its kind
// and micro-batch ("F3", "B0"); with more than one chunk per stage a
// letter names the rank's local chunk ("F3a" for its first, "F3b" for its
// second). A backward fills two columns with its label. Draw returns an
// error if the schedule is invalid or w fails.
func (s *Schedule) Draw(w io.Writer) error {
	// A forward takes one time slot and a backward two, the common
	// convention of the papers' figures.
	t, err := s.Simulate(UniformCosts(1, 2))
	if err != nil {
		return err
	}
	width := 1 // the widest label, for fixed-width cells
	for _, ops := range s.Ops {
		for _, op := range ops {
			width = max(width, len(s.label(op)))
		}
	}
	cols := int(math.Round(t.Makespan))
	var b strings.Builder
	b.WriteString(s.heading(t.Bubble()))
	rankWidth := len(fmt.Sprint(s.Stages - 1))
	for r, slots := range t.Ranks {
		cells := make([]string, cols)
		for i := range cells {
			cells[i] = "."
		}
		for _, sl := range slots {
			for c := int(math.Round(sl.Start)); c < int(math.Round(sl.End)); c++ {
				cells[c] = s.label(sl.Op)
			}
		}
		fmt.Fprintf(&b, "stage %*d |", rankWidth, r)
		var line strings.Builder
		for _, c := range cells {
			fmt.Fprintf(&line, " %-*s", width, c)
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// heading says what the table shows.
func (s *Schedule) heading(bubble float64) string {
	chunks, label := "", "F = forward, B = backward"
	if s.Virtual > 1 {
		chunks = ", " + plural(s.Virtual, "chunk") + " per stage"
		label = fmt.Sprintf("stage s holds chunks s, s+%d, ... as a, b, ...; F3b = forward of micro-batch 3 through the stage's chunk b, B = backward", s.Stages)
	}
	return fmt.Sprintf("%s: %s, %s%s (%s; 1 column = one forward's time, a backward takes 2, . = idle; bubble %.1f%%)\n",
		s.Name, plural(s.Stages, "stage"), plural(s.Micro, "micro-batch"), chunks, label, 100*bubble)
}

// plural writes n things: "1 stage", "4 micro-batches".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if strings.HasSuffix(thing, "ch") {
		return fmt.Sprintf("%d %ses", n, thing)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// label names op in a cell: "F3", or "F3b" for the rank's second chunk
// when it has several; past 26 chunks the letter becomes ":27".
func (s *Schedule) label(op Op) string {
	l := fmt.Sprintf("%v%d", op.Kind, op.MB)
	if s.Virtual == 1 {
		return l
	}
	local := s.Local(op.Chunk)
	if s.Virtual <= 26 {
		return l + string(rune('a'+local))
	}
	return fmt.Sprintf("%s:%d", l, local+1)
}
