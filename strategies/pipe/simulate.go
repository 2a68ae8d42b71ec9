package pipe

import (
	"fmt"
	"math"
	"strings"
)

// Costs gives the duration of each op and of a message between ranks.
type Costs struct {
	// Forward and Backward give the duration of the forward and the
	// backward pass of a chunk, the same for all micro-batches.
	Forward, Backward func(chunk int) float64
	// Comm is the time a message between two ranks takes, added between
	// an op and a dependent op on another rank (0 for none).
	Comm float64
}

// UniformCosts returns costs of f for every forward and b for every
// backward, with no communication time.
func UniformCosts(f, b float64) Costs {
	return Costs{
		Forward:  func(int) float64 { return f },
		Backward: func(int) float64 { return b },
	}
}

// Slot is an op and the time it runs, from Start to End.
type Slot struct {
	Op         Op
	Start, End float64
}

// Timeline is a simulated run of a schedule: each rank's slots in the
// order of its ops, and the time the last one ends.
type Timeline struct {
	Schedule *Schedule
	Ranks    [][]Slot
	Makespan float64
}

// Simulate runs s under costs c, as a discrete-event simulation: each op
// starts when its rank has finished its previous op and the ops it
// depends on are done, plus c.Comm for each one on another rank. F(c, mb)
// depends on F(c-1, mb); B(c, mb) on F(c, mb) and B(c+1, mb). It returns
// an error wrapping ErrInvalid if s does not run each op exactly once on
// the rank of its chunk, or if c gives no, negative or non-finite times,
// and one wrapping ErrDeadlock, naming the ops that wait on each other,
// if s deadlocks.
func (s *Schedule) Simulate(c Costs) (*Timeline, error) {
	if c.Forward == nil || c.Backward == nil {
		return nil, fmt.Errorf("%w: costs without a Forward or a Backward function; use UniformCosts or set both", ErrInvalid)
	}
	if !validTime(c.Comm) {
		return nil, fmt.Errorf("%w: Costs.Comm = %v; pass a finite time >= 0", ErrInvalid, c.Comm)
	}
	at, err := s.check()
	if err != nil {
		return nil, err
	}
	sim := &simulation{s: s, c: c, at: at, end: make([]float64, len(at)), done: make([]bool, len(at))}
	return sim.run()
}

func validTime(t float64) bool { return t >= 0 && !math.IsInf(t, 1) }

// simulation is the state of one Simulate.
type simulation struct {
	s    *Schedule
	c    Costs
	at   []place   // where each op sits, by opIndex
	end  []float64 // when each op ends, by opIndex, once done
	done []bool    // by opIndex
}

// run advances every rank as far as its dependencies allow, until all
// are done or none can move.
func (sim *simulation) run() (*Timeline, error) {
	s := sim.s
	t := &Timeline{Schedule: s, Ranks: make([][]Slot, s.Stages)}
	for r := range t.Ranks {
		t.Ranks[r] = make([]Slot, 0, len(s.Ops[r]))
	}
	for moved := true; moved; {
		moved = false
		for r, ops := range s.Ops {
			for len(t.Ranks[r]) < len(ops) {
				slot, ok, err := sim.try(r, ops[len(t.Ranks[r])], t.Ranks[r])
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				t.Ranks[r] = append(t.Ranks[r], slot)
				t.Makespan = max(t.Makespan, slot.End)
				moved = true
			}
		}
	}
	for r, ops := range s.Ops {
		if len(t.Ranks[r]) < len(ops) {
			return nil, sim.deadlock(r, t)
		}
	}
	return t, nil
}

// try runs op, rank r's next, after its earlier slots, if what op
// depends on is done.
func (sim *simulation) try(r int, op Op, earlier []Slot) (Slot, bool, error) {
	start := 0.0
	if len(earlier) > 0 {
		start = earlier[len(earlier)-1].End
	}
	for _, d := range sim.s.deps(op) {
		j := sim.s.opIndex(d)
		if !sim.done[j] {
			return Slot{}, false, nil
		}
		ready := sim.end[j]
		if sim.s.Rank(d.Chunk) != r {
			ready += sim.c.Comm
		}
		start = max(start, ready)
	}
	dur := sim.c.Forward(op.Chunk)
	if op.Kind == Backward {
		dur = sim.c.Backward(op.Chunk)
	}
	if !validTime(dur) {
		return Slot{}, false, fmt.Errorf("%w: the costs give %v a duration of %v; durations must be finite and >= 0", ErrInvalid, op, dur)
	}
	j := sim.s.opIndex(op)
	sim.done[j], sim.end[j] = true, start+dur
	return Slot{op, start, start + dur}, true, nil
}

// deps returns the ops op depends on.
func (s *Schedule) deps(op Op) []Op {
	if op.Kind == Forward {
		if op.Chunk == 0 {
			return nil
		}
		return []Op{{Forward, op.Chunk - 1, op.MB}}
	}
	d := []Op{{Forward, op.Chunk, op.MB}}
	if op.Chunk < s.Chunks()-1 {
		d = append(d, Op{Backward, op.Chunk + 1, op.MB})
	}
	return d
}

// deadlock describes the cycle of waits that rank r, stuck, is part of
// or leads to: each stuck rank's next op waits for an op that a stuck
// rank (maybe itself) runs later.
func (sim *simulation) deadlock(r int, t *Timeline) error {
	s := sim.s
	var waits []string
	onPath := map[int]int{} // rank -> index in waits
	for {
		if k, ok := onPath[r]; ok {
			waits = waits[k:]
			break
		}
		i := len(t.Ranks[r])
		op := s.Ops[r][i]
		blocker, ok := sim.blocker(op)
		if !ok { // cannot happen: a rank stops only at an op that waits
			waits = append(waits, fmt.Sprintf("rank %d stops at op %d %v", r, i, op))
			break
		}
		next := sim.at[s.opIndex(blocker)]
		onPath[r] = len(waits)
		waits = append(waits, fmt.Sprintf("rank %d's op %d %v waits for %v, rank %d's op %d", r, i, op, blocker, next.r, next.i))
		r = next.r
	}
	return fmt.Errorf("%w: %s; reorder the ops so that each comes after the ops it needs", ErrDeadlock, strings.Join(waits, "; "))
}

// blocker returns an op that op depends on and that is not done.
func (sim *simulation) blocker(op Op) (Op, bool) {
	for _, d := range sim.s.deps(op) {
		if !sim.done[sim.s.opIndex(d)] {
			return d, true
		}
	}
	return Op{}, false
}

// Busy returns the time rank r spends running ops; 0 for a rank out of
// range.
func (t *Timeline) Busy(r int) float64 {
	if r < 0 || r >= len(t.Ranks) {
		return 0
	}
	var busy float64
	for _, sl := range t.Ranks[r] {
		busy += sl.End - sl.Start
	}
	return busy
}

// Bubble returns the idle share of the pipeline, 1 - (sum of Busy) /
// (ranks * Makespan); 0 for an empty timeline.
func (t *Timeline) Bubble() float64 {
	if t.Makespan <= 0 || len(t.Ranks) == 0 {
		return 0
	}
	var busy float64
	for r := range t.Ranks {
		busy += t.Busy(r)
	}
	return 1 - busy/(float64(len(t.Ranks))*t.Makespan)
}

// IdealBubble returns the idle share the papers give for the schedule
// called name with p stages, m micro-batches and v chunks per stage, with
// no communication time: (p-1)/(m+p-1) for "gpipe" and "1f1b" (v is not
// used), ((p-1)/v)/(m+(p-1)/v) for "interleaved". It returns NaN for an
// unknown name or p, m or v below 1.
func IdealBubble(name string, p, m, v int) float64 {
	if p < 1 || m < 1 || v < 1 {
		return math.NaN()
	}
	switch name {
	case NameGPipe, NameOneFOneB:
		v = 1
	case NameInterleaved:
	default:
		return math.NaN()
	}
	b := float64(p-1) / float64(v)
	return b / (float64(m) + b)
}
