package prims

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Tune measures what the model only estimates: for every collective with
// several algorithms that apply to the communicator, it times each of
// them over a sweep of sizes, and keeps the fastest per size as a
// decision table (gorun --tune), which keeps the model's choice where it
// measured within 5% of the fastest, or where a longer run of the two
// (confirm) measured it so. Its timing is collbench's: warm-up
// calls, then rounds in which each algorithm in turn times a few calls
// (fewer as sizes grow), each round starting with the next algorithm; an
// algorithm's time is its median over the rounds of the slowest rank's
// mean.

// TuneConfig says what Tune measures.
type TuneConfig struct {
	MinBytes, MaxBytes int // the sizes, counted as Choose counts them
	Factor             int // from MinBytes, multiplied by Factor up to MaxBytes
	Rounds             int // rounds of taking turns; the median is kept
	// ConfirmCalls is the most calls of a timing that confirms a pick
	// against the model (confirmIters); 0 is 2,000.
	ConfirmCalls int
}

// DefaultTuneConfig is gorun --tune's sweep: 8 B to 16 MiB by factors of
// 4, 5 rounds. At 4 ranks on 2 cores it takes well under a minute.
func DefaultTuneConfig() TuneConfig {
	return TuneConfig{MinBytes: 8, MaxBytes: 16 << 20, Factor: 4, Rounds: 5}
}

// Validate checks the sweep.
func (cfg TuneConfig) Validate() error {
	if cfg.MinBytes < 1 || cfg.MaxBytes < cfg.MinBytes || cfg.MaxBytes > 1<<30 {
		return fmt.Errorf("tune sizes %d to %d bytes: want 1 <= MIN <= MAX <= 1 GiB", cfg.MinBytes, cfg.MaxBytes)
	}
	if cfg.Factor < 2 || cfg.Rounds < 1 || cfg.ConfirmCalls < 0 {
		return fmt.Errorf("tune factor %d, rounds %d, confirming calls %d: want a factor of 2 or more, 1 round or more and no negative calls", cfg.Factor, cfg.Rounds, cfg.ConfirmCalls)
	}
	return nil
}

// TunePoint is one collective at one size as Tune measured it.
type TunePoint struct {
	Coll    topo.Collective
	Bytes   int         // as Choose counts them (blocked buffers round to p elements)
	Algos   []topo.Algo // those measured
	Seconds []float64   // Seconds[i]: one call by Algos[i]
	Model   topo.Algo   // the model's choice
	// Kept is what the table keeps: Pick, unless the confirmation of a
	// pick against the model (Confirm: their seconds a call, model first,
	// in longer runs) measured the model within TuneTie of it.
	Kept    topo.Algo
	Confirm []float64
}

// Best returns the fastest algorithm measured and its time.
func (pt TunePoint) Best() (topo.Algo, float64) {
	i := 0
	for j, s := range pt.Seconds {
		if s < pt.Seconds[i] {
			i = j
		}
	}
	return pt.Algos[i], pt.Seconds[i]
}

// TuneTie is how close to the fastest the model's choice must measure for
// the table to keep it: the model is the prior, and measurements at
// neighbouring sizes otherwise flip between algorithms that differ by
// noise.
const TuneTie = 1.05

// Pick returns the sweep's choice: the model's where it measured within
// TuneTie of the fastest, else the fastest. The table keeps Kept, which a
// longer run (confirm) may set back to the model's.
func (pt TunePoint) Pick() topo.Algo {
	best, secs := pt.Best()
	if pt.ModelSeconds() <= secs*TuneTie {
		return pt.Model
	}
	return best
}

// ModelSeconds returns the measured time of the model's choice, or +Inf
// when it was not measured (it does not run here).
func (pt TunePoint) ModelSeconds() float64 {
	if i := slices.Index(pt.Algos, pt.Model); i >= 0 {
		return pt.Seconds[i]
	}
	return math.Inf(1)
}

// Agreement is how close a model's choice must be to the fastest
// measured for the model to count as right at that size.
const Agreement = 1.15

// ModelAgrees reports whether the model's choice measured within
// Agreement of the fastest.
func (pt TunePoint) ModelAgrees() bool {
	_, best := pt.Best()
	return pt.ModelSeconds() <= best*Agreement
}

// Tuning is what Tune measured on rank 0: the table and its points, and
// the model and layout whose choices the points record.
type Tuning struct {
	Table  TuneTable
	Points []TunePoint
	Model  topo.Model
	Layout topo.Layout
}

// Tune measures the algorithms of every collective on c over cfg's sizes
// (see above) and returns, on rank 0, the table of the fastest per size
// for c's key; other ranks get an empty Tuning. Every rank of c must call
// it. It fits c's model first, whose choices the points record.
func Tune(ctx context.Context, c *spmd.Comm, cfg TuneConfig) (Tuning, error) {
	if err := cfg.Validate(); err != nil {
		return Tuning{}, err
	}
	if c.Size() < 2 {
		return Tuning{}, errors.New("tuning needs 2 ranks or more: with one, every collective is a copy")
	}
	tuning.Store(true)
	defer tuning.Store(false)
	m, err := topo.ModelFor(ctx, c)
	if err != nil {
		return Tuning{}, fmt.Errorf("tuning: %w", err)
	}
	lay := topo.LayoutOf(c)
	shares := SharedMemory(c) == nil
	p := c.Size()
	send := make([]float32, cfg.MaxBytes/4+p)
	recv := make([]float32, cfg.MaxBytes/4+p)
	host, _ := os.Hostname()
	tn := Tuning{Table: TuneTable{TuneKey: tuneKeyOf(c), MeasuredOn: host, MeasuredAt: time.Now().UTC().Truncate(time.Second)}, Model: m, Layout: lay}
	for _, coll := range topo.Collectives {
		var rule TuneRule
		last := -1
		for _, n := range cfg.sizes(coll) {
			count, bytes := tuneCount(coll, n, p)
			if bytes == last {
				continue // small sizes of many ranks round up to one block each
			}
			last = bytes
			var algos []topo.Algo
			for _, a := range Algos(coll) {
				if !math.IsInf(Cost(m, coll, a, p, bytes, lay), 0) && (a != topo.Shared || shares) {
					algos = append(algos, a)
				}
			}
			if len(algos) < 2 {
				continue
			}
			secs, err := timeAlgos(ctx, c, coll, algos, count, send, recv, cfg.Rounds, tuneIters(4*count), sweepBudget)
			if err != nil {
				return Tuning{}, fmt.Errorf("tuning %s at %d bytes on rank %d: %w", coll, bytes, c.Rank(), err)
			}
			var pt TunePoint
			if c.Rank() == 0 {
				pt = TunePoint{Coll: coll, Bytes: bytes, Algos: algos, Seconds: secs, Model: Cheapest(m, coll, p, bytes, lay)}
				pt.Kept = pt.Pick()
			}
			if err := confirm(ctx, c, coll, &pt, algos, count, send, recv, confirmIters(4*count, cfg.ConfirmCalls)); err != nil {
				return Tuning{}, fmt.Errorf("tuning %s at %d bytes on rank %d: %w", coll, bytes, c.Rank(), err)
			}
			if c.Rank() != 0 {
				continue
			}
			tn.Points = append(tn.Points, pt)
			if a := pt.Kept; len(rule.Steps) == 0 || rule.Steps[len(rule.Steps)-1].Algo != string(a) {
				rule.Steps = append(rule.Steps, TuneStep{From: bytes, Algo: string(a)})
			}
		}
		if len(rule.Steps) > 0 {
			rule.Collective = coll.String()
			tn.Table.Rules = append(tn.Table.Rules, rule)
		}
	}
	return tn, nil
}

// sizes returns the sizes of the sweep of coll: one, 0, for Barrier.
func (cfg TuneConfig) sizes(coll topo.Collective) []int {
	if coll == topo.Barrier {
		return []int{0}
	}
	var ns []int
	for n := cfg.MinBytes; n <= cfg.MaxBytes; n *= cfg.Factor {
		ns = append(ns, n)
	}
	if ns[len(ns)-1] < cfg.MaxBytes {
		ns = append(ns, cfg.MaxBytes) // 8 B by 4 ends at 8 MiB, short of 16
	}
	return ns
}

// tuneCount returns the float32 elements of coll's buffer for about n
// bytes on p ranks, and its bytes as Choose counts them: whole blocks of
// p for the collectives that cut their buffer by rank, 0 for Barrier.
func tuneCount(coll topo.Collective, n, p int) (count, bytes int) {
	count = max(1, n/4)
	switch coll {
	case topo.Gather, topo.Scatter, topo.AllGather, topo.ReduceScatter, topo.AllToAll:
		count = max(p, count/p*p)
	case topo.Barrier:
		return 0, 0
	}
	return count, 4 * count
}

// tuneIters is how many calls of about n bytes one timing takes: fewer as
// they grow, so that the sweep stays short. With at most 20 calls (about
// 20 us at 8 B) one preemption on a 2-core host decided whole sizes;
// 200 keep the smallest timings near a millisecond.
func tuneIters(n int) int {
	return max(1, min(200, (4<<20)/max(n, 1)))
}

// confirmIters is how many calls of about n bytes a confirmation's
// timing takes: ten times a sweep's, up to most (0: 2,000), so that an algorithm
// that only runs fast for a while after a barrier shows its steady pace.
// On 16 cores at np 16 with ranks unbound, the sweep measured recursive
// doubling's 32-byte all-reduce at 7.5 us a call in runs of 200, and the
// table it wrote chose it; in collbench's runs of 2,000 calls it took 241
// to 328 us, against 5 us for the shared algorithm, the model's choice.
func confirmIters(n, most int) int {
	if most == 0 {
		most = 2000
	}
	return max(1, min(most, (40<<20)/max(n, 1)))
}

// confirmRounds is how many rounds a confirmation takes turns for.
const confirmRounds = 3

// confirm times, where the sweep of pt (coll's, rank 0's) would have the
// table override the model, the pick against the model's choice again in
// longer runs of iters calls, and keeps the model unless the pick still
// beats it by more than TuneTie. Rank 0 says which pair to time, or none;
// every rank of c must call it.
func confirm(ctx context.Context, c *spmd.Comm, coll topo.Collective, pt *TunePoint, algos []topo.Algo, count int, send, recv []float32, iters int) error {
	cc := c.Collective()
	msg := make([]byte, 2)
	if cc.Rank() == 0 {
		mi, ki := slices.Index(algos, pt.Model), slices.Index(algos, pt.Kept)
		if mi >= 0 && ki >= 0 && mi != ki {
			msg[0], msg[1] = byte(mi+1), byte(ki+1)
		}
		for r := 1; r < cc.Size(); r++ {
			if err := cc.Send(ctx, r, tuneConfirmTag, msg); err != nil {
				return err
			}
		}
	} else if _, err := cc.Recv(ctx, 0, tuneConfirmTag, msg); err != nil {
		return err
	}
	if msg[0] == 0 || int(msg[0]) > len(algos) || int(msg[1]) > len(algos) {
		return nil
	}
	pair := []topo.Algo{algos[msg[0]-1], algos[msg[1]-1]}
	secs, err := timeAlgos(ctx, c, coll, pair, count, send, recv, confirmRounds, iters, confirmBudget)
	if err != nil || cc.Rank() != 0 {
		return err
	}
	pt.Confirm = secs
	if secs[0] <= secs[1]*TuneTie {
		pt.Kept = pt.Model
	}
	return nil
}

// tuneConfirmTag is the collective-context tag on which rank 0 tells the
// others what to confirm.
const tuneConfirmTag = noticeTag + 3

// timeAlgos times count elements of coll by each of algos (see Tune),
// iters calls a timing, and returns, on rank 0, the seconds of one call
// by each.
func timeAlgos(ctx context.Context, c *spmd.Comm, coll topo.Collective, algos []topo.Algo, count int, send, recv []float32, rounds, iters int, budget time.Duration) ([]float64, error) {
	k := len(algos)
	calls := make([]func() error, k)
	fastest := make([]time.Duration, k) // a warm-up call's least time, rank 0's
	for i, a := range algos {
		calls[i] = tuneCall(ctx, c, coll, a, count, send, recv)
		for w := range min(iters, 4) { // warm-up
			start := time.Now()
			if err := calls[i](); err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			if d := time.Since(start); w == 0 || d < fastest[i] {
				fastest[i] = d
			}
		}
	}
	n, err := budgeted(ctx, c, fastest, iters, budget)
	if err != nil {
		return nil, err
	}
	stats := make([]float64, k*rounds)
	for round := range rounds {
		for j := range k {
			i := (round + j) % k
			if err := c.Barrier(ctx); err != nil {
				return nil, err
			}
			start := time.Now()
			for range n[i] {
				if err := calls[i](); err != nil {
					return nil, fmt.Errorf("%s: %w", algos[i], err)
				}
			}
			stats[i*rounds+round] = time.Since(start).Seconds() / float64(n[i])
		}
	}
	if err := slowest(ctx, c, stats); err != nil {
		return nil, err
	}
	secs := make([]float64, k)
	for i := range secs {
		s := stats[i*rounds : (i+1)*rounds]
		slices.Sort(s)
		secs[i] = s[(len(s)-1)/2]
	}
	return secs, nil
}

// Timing budgets: the most time one algorithm's timing in one round
// takes in a sweep, and in a confirmation. Where calls are slow (ranks on
// two hosts over TCP, or crowded on few cores: 1-5 ms for 64 bytes on
// the test rig) the calls' counts made one size of a sweep take minutes;
// where calls take microseconds, the counts bound a timing first, as
// before (200 calls of 7.5 us, 2,000 in a confirmation).
const (
	sweepBudget   = 50 * time.Millisecond
	confirmBudget = 10 * sweepBudget
)

// minTimed is the fewest calls a budget leaves a timing.
const minTimed = 10

// budgeted returns, on every rank, each algorithm's calls a timing: iters,
// or fewer where rank 0's fastest warm-up call says that iters would take
// past budget, but at least minTimed. Rank 0 decides, so that every rank
// makes the same calls.
func budgeted(ctx context.Context, c *spmd.Comm, fastest []time.Duration, iters int, budget time.Duration) ([]int, error) {
	cc := c.Collective()
	msg := make([]byte, 4*len(fastest))
	if cc.Rank() == 0 {
		for i, d := range fastest {
			n := iters
			if d > 0 && time.Duration(iters)*d > budget {
				n = max(min(minTimed, iters), int(budget/d))
			}
			binary.LittleEndian.PutUint32(msg[4*i:], uint32(n))
		}
		for r := 1; r < cc.Size(); r++ {
			if err := cc.Send(ctx, r, tuneBudgetTag, msg); err != nil {
				return nil, err
			}
		}
	} else if _, err := cc.Recv(ctx, 0, tuneBudgetTag, msg); err != nil {
		return nil, err
	}
	n := make([]int, len(fastest))
	for i := range n {
		n[i] = int(binary.LittleEndian.Uint32(msg[4*i:]))
	}
	return n, nil
}

// tuneBudgetTag is the collective-context tag on which rank 0 tells the
// others how many calls each timing makes.
const tuneBudgetTag = noticeTag + 5

// tuneStatsTag is the collective-context tag on which ranks send their
// timings to rank 0.
const tuneStatsTag = noticeTag + 2

// slowest leaves in rank 0's stats the largest of every rank's, sent by
// point-to-point messages that never depend on the collectives timed.
func slowest(ctx context.Context, c *spmd.Comm, stats []float64) error {
	cc := c.Collective()
	msg := make([]byte, 8*len(stats))
	if cc.Rank() != 0 {
		for i, v := range stats {
			binary.LittleEndian.PutUint64(msg[8*i:], math.Float64bits(v))
		}
		return cc.Send(ctx, 0, tuneStatsTag, msg)
	}
	for src := 1; src < cc.Size(); src++ {
		if _, err := cc.Recv(ctx, src, tuneStatsTag, msg); err != nil {
			return err
		}
		for i := range stats {
			stats[i] = max(stats[i], math.Float64frombits(binary.LittleEndian.Uint64(msg[8*i:])))
		}
	}
	return nil
}

// tuneCall returns one call of coll by algo over count elements of send
// and recv (rank 0 the root).
func tuneCall(ctx context.Context, c *spmd.Comm, coll topo.Collective, algo topo.Algo, count int, send, recv []float32) func() error {
	with := WithAlgo(algo)
	blk := count / c.Size()
	switch coll {
	case topo.Broadcast:
		return func() error { return Broadcast(ctx, c, send[:count], 0, with) }
	case topo.Reduce:
		return func() error { return Reduce(ctx, c, send[:count], recv[:count], Sum[float32](), 0, with) }
	case topo.AllReduce:
		return func() error { return AllReduce(ctx, c, send[:count], Sum[float32](), with) }
	case topo.Gather:
		return func() error { return Gather(ctx, c, send[:blk], recv[:count], 0, with) }
	case topo.Scatter:
		return func() error { return Scatter(ctx, c, send[:count], recv[:blk], 0, with) }
	case topo.AllGather:
		return func() error { return AllGather(ctx, c, send[:blk], recv[:count], with) }
	case topo.ReduceScatter:
		return func() error { return ReduceScatter(ctx, c, send[:count], recv[:blk], Sum[float32](), with) }
	case topo.AllToAll:
		return func() error { return AllToAll(ctx, c, send[:count], recv[:count], with) }
	}
	return func() error { return Barrier(ctx, c, with) }
}
