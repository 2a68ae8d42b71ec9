package pipe

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of this package, wrapped with what was wrong; test them with
// errors.Is.
var (
	// ErrBadArgument is a generator's argument out of range: a pipeline
	// of no stages, no micro-batches or no chunks, an unknown schedule.
	ErrBadArgument = errors.New("pipe: bad argument")
	// ErrInvalid is a schedule that does not run each forward and
	// backward exactly once on the rank that holds its chunk.
	ErrInvalid = errors.New("pipe: invalid schedule")
	// ErrDeadlock is a schedule whose ranks wait on each other forever.
	ErrDeadlock = errors.New("pipe: schedule deadlocks")
)

// MaxOps bounds the operations of a generated schedule (2*p*m*v), so that
// a mistyped argument is an error rather than an allocation of gigabytes.
const MaxOps = 1 << 24

// Schedule names, as New takes them.
const (
	NameGPipe       = "gpipe"
	NameOneFOneB    = "1f1b"
	NameInterleaved = "interleaved"
)

// Kind of an operation.
type Kind uint8

// The kinds of an operation.
const (
	Forward  Kind = iota + 1 // forward pass
	Backward                 // backward pass
)

// String returns "F" or "B".
func (k Kind) String() string {
	switch k {
	case Forward:
		return "F"
	case Backward:
		return "B"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is one operation of a rank's schedule: the forward or backward pass of
// micro-batch MB through model chunk Chunk. Chunks are numbered globally in
// model order, 0 .. Stages*Virtual-1; chunk c lives on rank c % Stages
// (Megatron's interleaving: rank r holds chunks r, r+p, r+2p, ...).
type Op struct {
	Kind  Kind
	Chunk int
	MB    int
}

// String writes the op as "F(chunk 2, mb 5)".
func (o Op) String() string {
	return fmt.Sprintf("%v(chunk %d, mb %d)", o.Kind, o.Chunk, o.MB)
}

// Schedule is the order of operations of every rank of a pipeline of
// Stages ranks running Micro micro-batches through Stages*Virtual chunks.
// A Schedule is plain data: generate it once, then read it from any
// number of goroutines.
type Schedule struct {
	Name    string // "gpipe", "1f1b", "interleaved"
	Stages  int    // p
	Micro   int    // m
	Virtual int    // v, 1 except for interleaved
	Ops     [][]Op // Ops[r]: rank r's operations in the order it runs them
}

// New returns the schedule called name ("gpipe", "1f1b" or "interleaved")
// for p stages, m micro-batches and v chunks per stage; v must be 1 except
// for "interleaved".
func New(name string, p, m, v int) (*Schedule, error) {
	switch name {
	case NameGPipe, NameOneFOneB:
		if v != 1 {
			return nil, fmt.Errorf("%w: %s schedule with v = %d chunks per stage; only interleaved takes v > 1, pass v = 1 or use interleaved", ErrBadArgument, name, v)
		}
		if name == NameGPipe {
			return GPipe(p, m)
		}
		return OneFOneB(p, m)
	case NameInterleaved:
		return Interleaved(p, m, v)
	}
	return nil, fmt.Errorf("%w: unknown schedule %q; pass %q, %q or %q", ErrBadArgument, name, NameGPipe, NameOneFOneB, NameInterleaved)
}

// GPipe returns GPipe's schedule with a flush for p stages and m
// micro-batches: every rank runs all forwards F0..F(m-1), then all
// backwards B0..B(m-1). Each rank holds all m activations at its peak.
func GPipe(p, m int) (*Schedule, error) {
	if err := checkArgs(p, m, 1); err != nil {
		return nil, err
	}
	s := newSchedule(NameGPipe, p, m, 1)
	for r := range p {
		for mb := range m {
			s.Ops[r] = append(s.Ops[r], Op{Forward, r, mb})
		}
		for mb := range m {
			s.Ops[r] = append(s.Ops[r], Op{Backward, r, mb})
		}
	}
	return s, nil
}

// OneFOneB returns the 1F1B schedule (PipeDream-Flush, Megatron-LM's
// non-interleaved schedule) for p stages and m micro-batches: rank r
// warms up with min(p-r-1, m) forwards, then alternates one forward and
// one backward until it has run all m forwards, then cools down with the
// backwards left. Rank r holds at most min(p-r, m) activations.
func OneFOneB(p, m int) (*Schedule, error) {
	if err := checkArgs(p, m, 1); err != nil {
		return nil, err
	}
	s := newSchedule(NameOneFOneB, p, m, 1)
	for r := range p {
		s.Ops[r] = oneFOneB(min(p-r-1, m), m,
			func(k int) Op { return Op{Forward, r, k} },
			func(k int) Op { return Op{Backward, r, k} })
	}
	return s, nil
}

// Interleaved returns Megatron-LM's interleaved 1F1B schedule
// (forward_backward_pipelining_with_interleaving) for p stages, m
// micro-batches and v chunks per stage; m must be a multiple of p.
//
// Rank r's k-th forward (k from 0) runs its local chunk (k/p)%v on
// micro-batch (k/(p*v))*p + k%p; its k-th backward likewise, with the
// local chunks in reverse order. It warms up with
// min(2*(p-r-1) + (v-1)*p, m*v) forwards (all m*v when m == p), then
// alternates one forward and one backward, then cools down with the
// backwards left. With v == 1 it returns OneFOneB's ops, named
// "interleaved".
func Interleaved(p, m, v int) (*Schedule, error) {
	if err := checkArgs(p, m, v); err != nil {
		return nil, err
	}
	if m%p != 0 {
		return nil, fmt.Errorf("%w: interleaved schedule with m = %d micro-batches on p = %d stages; m must be a multiple of p, pass %s", ErrBadArgument, m, p, multiples(m, p))
	}
	if v == 1 {
		s, _ := OneFOneB(p, m) // the arguments were checked above
		s.Name = NameInterleaved
		return s, nil
	}
	s := newSchedule(NameInterleaved, p, m, v)
	for r := range p {
		op := func(kind Kind, k int) Op {
			local := (k / p) % v
			if kind == Backward {
				local = v - 1 - local
			}
			return Op{kind, local*p + r, (k/(p*v))*p + k%p}
		}
		s.Ops[r] = oneFOneB(InterleavedWarmup(p, m, v, r), m*v,
			func(k int) Op { return op(Forward, k) },
			func(k int) Op { return op(Backward, k) })
	}
	return s, nil
}

// InterleavedWarmup is the number of forwards rank r of Megatron's
// interleaved schedule runs before its first backward:
// min(2*(p-r-1) + (v-1)*p, m*v), or m*v when m == p. Interleaved uses it
// for v > 1.
func InterleavedWarmup(p, m, v, r int) int {
	if m == p {
		return m * v
	}
	return min(2*(p-r-1)+(v-1)*p, m*v)
}

// multiples names the multiples of p next to m: "m = 4 or 8".
func multiples(m, p int) string {
	lo := m / p * p
	if lo == 0 {
		return fmt.Sprintf("m = %d", p)
	}
	return fmt.Sprintf("m = %d or %d", lo, lo+p)
}

// oneFOneB lists n forwards and n backwards: warmup forwards, then
// pairs of a forward and a backward, then the backwards left.
func oneFOneB(warmup, n int, fwd, bwd func(k int) Op) []Op {
	ops := make([]Op, 0, 2*n)
	for k := range warmup {
		ops = append(ops, fwd(k))
	}
	for k := range n - warmup {
		ops = append(ops, fwd(k+warmup), bwd(k))
	}
	for k := n - warmup; k < n; k++ {
		ops = append(ops, bwd(k))
	}
	return ops
}

func newSchedule(name string, p, m, v int) *Schedule {
	s := &Schedule{Name: name, Stages: p, Micro: m, Virtual: v, Ops: make([][]Op, p)}
	for r := range s.Ops {
		s.Ops[r] = make([]Op, 0, 2*m*v)
	}
	return s
}

// checkArgs checks a generator's p, m and v.
func checkArgs(p, m, v int) error {
	switch {
	case p < 1:
		return fmt.Errorf("%w: p = %d stages; pass p >= 1", ErrBadArgument, p)
	case m < 1:
		return fmt.Errorf("%w: m = %d micro-batches; pass m >= 1", ErrBadArgument, m)
	case v < 1:
		return fmt.Errorf("%w: v = %d chunks per stage; pass v >= 1", ErrBadArgument, v)
	}
	if n, ok := countOps(p, m, v); !ok || n > MaxOps {
		return fmt.Errorf("%w: p = %d stages, m = %d micro-batches and v = %d chunks make more than %d operations; pass smaller numbers", ErrBadArgument, p, m, v, MaxOps)
	}
	return nil
}

// countOps returns 2*p*m*v, and false if it overflows an int.
func countOps(p, m, v int) (int, bool) {
	n := 2
	for _, x := range []int{p, m, v} {
		if x < 0 || (x > 0 && n > (1<<62)/x) {
			return 0, false
		}
		n *= x
	}
	return n, true
}

// Chunks returns the number of model chunks, Stages*Virtual.
func (s *Schedule) Chunks() int { return s.Stages * s.Virtual }

// Rank returns the rank that holds chunk: chunk % Stages.
func (s *Schedule) Rank(chunk int) int { return chunk % s.Stages }

// Local returns chunk's index among its rank's chunks: chunk / Stages
// (0 for the rank's first chunk, Virtual-1 for its last).
func (s *Schedule) Local(chunk int) int { return chunk / s.Stages }

// MaxInFlight returns the largest number of (chunk, micro-batch)
// activations rank r holds at once, forwarded and not yet backwarded,
// walking its ops in order; 0 for a rank out of range.
func (s *Schedule) MaxInFlight(r int) int {
	if r < 0 || r >= len(s.Ops) {
		return 0
	}
	n, peak := 0, 0
	for _, op := range s.Ops[r] {
		switch op.Kind {
		case Forward:
			n++
			peak = max(peak, n)
		case Backward:
			n--
		}
	}
	return peak
}

// Validate checks that every rank runs each forward and backward of each
// of its chunks and micro-batches exactly once, and simulates s to check
// that it cannot deadlock. Errors wrap ErrInvalid or ErrDeadlock.
func (s *Schedule) Validate() error {
	_, err := s.Simulate(UniformCosts(1, 2))
	return err
}

// place is where an op sits: rank r's i-th op.
type place struct{ r, i int }

// check checks s's shape and that it holds each op exactly once on the
// rank of its chunk; it returns where each op sits, by opIndex.
func (s *Schedule) check() ([]place, error) {
	if s.Stages < 1 || s.Micro < 1 || s.Virtual < 1 {
		return nil, fmt.Errorf("%w: %d stages, %d micro-batches, %d chunks per stage; each must be at least 1", ErrInvalid, s.Stages, s.Micro, s.Virtual)
	}
	if len(s.Ops) != s.Stages {
		return nil, fmt.Errorf("%w: %d ranks' op lists for %d stages; give Ops one list per stage", ErrInvalid, len(s.Ops), s.Stages)
	}
	have := 0
	for _, ops := range s.Ops {
		have += len(ops)
	}
	want, ok := countOps(s.Stages, s.Micro, s.Virtual)
	if !ok || (want > have && want > MaxOps) {
		// Report the count before allocating a table for each op that
		// should be there, which would be huge.
		return nil, fmt.Errorf("%w: %d ops for %d stages, %d micro-batches and %d chunks per stage, which need %s; add the missing ops", ErrInvalid, have, s.Stages, s.Micro, s.Virtual, countText(want, ok))
	}
	at := make([]place, want)
	seen := make([]bool, want)
	for r, ops := range s.Ops {
		for i, op := range ops {
			if err := s.checkOp(op); err != nil {
				return nil, fmt.Errorf("%w: rank %d op %d: %w", ErrInvalid, r, i, err)
			}
			if s.Rank(op.Chunk) != r {
				return nil, fmt.Errorf("%w: rank %d op %d: %v belongs on rank %d, which holds chunk %d; move it there", ErrInvalid, r, i, op, s.Rank(op.Chunk), op.Chunk)
			}
			j := s.opIndex(op)
			if seen[j] {
				return nil, fmt.Errorf("%w: rank %d runs %v twice, as op %d and op %d; drop one", ErrInvalid, r, op, at[j].i, i)
			}
			seen[j], at[j] = true, place{r, i}
		}
	}
	if want > have {
		return nil, s.missing(seen, want-have)
	}
	// want == have and no op twice: all are there.
	return at, nil
}

// missing names the first of the n ops that seen lacks.
func (s *Schedule) missing(seen []bool, n int) error {
	var names []string
	for kind := Forward; kind <= Backward; kind++ {
		for c := range s.Chunks() {
			for mb := range s.Micro {
				op := Op{kind, c, mb}
				if !seen[s.opIndex(op)] && len(names) < 3 {
					names = append(names, fmt.Sprintf("%v on rank %d", op, s.Rank(c)))
				}
			}
		}
	}
	more := ""
	if n > len(names) {
		more = fmt.Sprintf(" and %d more", n-len(names))
	}
	return fmt.Errorf("%w: no rank runs %s%s; add each forward and backward of every chunk and micro-batch once", ErrInvalid, strings.Join(names, ", "), more)
}

// checkOp checks op's kind, chunk and micro-batch.
func (s *Schedule) checkOp(op Op) error {
	switch {
	case op.Kind != Forward && op.Kind != Backward:
		return fmt.Errorf("%v has kind %d; use Forward or Backward", op, uint8(op.Kind))
	case op.Chunk < 0 || op.Chunk >= s.Chunks():
		return fmt.Errorf("%v: chunk %d is out of range; the %d chunks run from 0 to %d", op, op.Chunk, s.Chunks(), s.Chunks()-1)
	case op.MB < 0 || op.MB >= s.Micro:
		return fmt.Errorf("%v: micro-batch %d is out of range; the %d micro-batches run from 0 to %d", op, op.MB, s.Micro, s.Micro-1)
	}
	return nil
}

func countText(n int, ok bool) string {
	if !ok {
		return "more than an int counts"
	}
	return fmt.Sprint(n)
}

// opIndex numbers the ops of a valid s from 0 to 2*Chunks*Micro-1.
func (s *Schedule) opIndex(op Op) int {
	return ((int(op.Kind)-1)*s.Chunks()+op.Chunk)*s.Micro + op.MB
}
