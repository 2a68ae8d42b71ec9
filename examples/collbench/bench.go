package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// elem is the element types collbench measures.
type elem interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8
}

// ErrWrong is returned when -c 1 found wrong elements.
var ErrWrong = fmt.Errorf("wrong results")

func run(ctx context.Context, cfg config, out io.Writer) error {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	switch cfg.typ {
	case "float64":
		return runType[float64](ctx, w, cfg, out)
	case "int32":
		return runType[int32](ctx, w, cfg, out)
	case "int64":
		return runType[int64](ctx, w, cfg, out)
	case "uint8":
		return runType[uint8](ctx, w, cfg, out)
	}
	return runType[float32](ctx, w, cfg, out)
}

// header is the column line rank 0 prints first.
const header = "# op            np        bytes        count    type  redop          algo      time_us  algbw_GBps  busbw_GBps   wrong"

// forOp is cfg for one op of several: the algorithms of --algo that do
// not implement it are left out (and listed), so that --op all --algo
// shared measures every collective shared implements. With one op, an
// algorithm that does not implement it stays, and its error says so.
func (cfg config) forOp(op string) (config, []string) {
	coll, err := topo.ParseCollective(op)
	if err != nil || len(cfg.ops) < 2 {
		return cfg, nil
	}
	var keep, skipped []string
	for _, a := range cfg.algos {
		if a == "" || prims.Applies(coll, topo.Algo(a)) {
			keep = append(keep, a)
		} else {
			skipped = append(skipped, a)
		}
	}
	cfg.algos = keep
	return cfg, skipped
}

func runType[T elem](ctx context.Context, w *spmd.World, cfg config, out io.Writer) error {
	if w.Rank() == 0 {
		fmt.Fprintf(out, "# collbench: %d ranks, %d iterations after %d warm-up, check %v", w.Size(), cfg.iters, cfg.warmup, cfg.check)
		if cfg.rounds > 1 {
			fmt.Fprintf(out, ", median of %d rounds", cfg.rounds)
		}
		fmt.Fprintln(out)
		fmt.Fprintln(out, header)
	}
	wrongAll := 0.0
	var mem arena[T]
	mem.reserve(max(w.Size(), cfg.maxBytes/int(unsafe.Sizeof(T(0)))))
	for _, op := range cfg.ops {
		opCfg, skipped := cfg.forOp(op)
		if w.Rank() == 0 && len(skipped) > 0 {
			verb := "does"
			if len(skipped) > 1 {
				verb = "do"
			}
			fmt.Fprintf(out, "# %s: skipping %s, which %s not implement it\n", op, strings.Join(skipped, ", "), verb)
		}
		if len(opCfg.algos) == 0 {
			continue
		}
		for size := cfg.minBytes; size <= cfg.maxBytes; size *= cfg.factor {
			rs, err := measure(ctx, w.Comm, opCfg, &mem, op, size)
			if err != nil {
				return fmt.Errorf("%s of %d bytes on rank %d: %w", op, size, w.Rank(), err)
			}
			for _, r := range rs {
				if w.Rank() == 0 {
					r.print(out, cfg)
				}
				wrongAll += r.wrong
			}
			if size == 0 {
				break
			}
		}
	}
	if wrongAll > 0 {
		return fmt.Errorf("%v wrong elements: %w", wrongAll, ErrWrong)
	}
	return nil
}

// result is one line of the report.
type result struct {
	op, typ, redop string
	np             int
	bytes, count   int
	algo           topo.Algo
	seconds        float64 // mean time of one call on the slowest rank (the median over rounds)
	wrong          float64 // over all ranks; on rank 0 only
}

func (r result) print(out io.Writer, cfg config) {
	algbw := float64(r.bytes) / r.seconds / 1e9
	wrong := "N/A"
	if cfg.check {
		wrong = fmt.Sprint(int64(r.wrong))
	}
	redop := r.redop
	if !reduces(r.op) {
		redop = "none"
	}
	fmt.Fprintf(out, "%-15s %4d %12d %12d %7s %6s %13s %12.2f %11.3f %11.3f %7s\n",
		r.op, r.np, r.bytes, r.count, r.typ, redop, r.algo, r.seconds*1e6, algbw, algbw*busFactor(r.op, r.np), wrong)
}

// busFactor is the nccl-tests factor from algorithm to bus bandwidth.
func busFactor(op string, n int) float64 {
	switch op {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "broadcast", "reduce":
		return 1
	}
	return float64(n-1) / float64(n)
}

func reduces(op string) bool {
	return op == "allreduce" || op == "reduce" || op == "reducescatter"
}

// measure runs one size of one collective with each algorithm of
// cfg.algos: warm-up (and check) for each, then cfg.rounds rounds in which
// each algorithm in turn times cfg.iters calls, starting each round with
// the next algorithm so that none always runs first.
func measure[T elem](ctx context.Context, c *spmd.Comm, cfg config, mem *arena[T], op string, size int) ([]result, error) {
	var zero T
	esize := int(unsafe.Sizeof(zero))
	p := c.Size()
	count := max(1, size/esize)
	if blocked(op) {
		count = max(p, count/p*p)
	}
	coll, err := topo.ParseCollective(op)
	if err != nil {
		return nil, err
	}
	b := newBufs(mem, op, c.Rank(), p, count, cfg.redop)
	k := len(cfg.algos)
	results := make([]result, k)
	calls := make([]func(context.Context) error, k)
	for i, name := range cfg.algos {
		var algo topo.Algo
		if name == "" {
			algo, err = prims.Choose(ctx, c, coll, count*esize)
		} else {
			algo, err = topo.ParseAlgo(name)
		}
		if err != nil {
			return nil, err
		}
		results[i] = result{op: op, typ: cfg.typ, redop: cfg.redop, np: p, bytes: count * esize, count: count, algo: algo}
		calls[i] = caller(op, cfg.redop, algo, c, b)
	}
	// stats holds this rank's figures, sent to rank 0 at the end: the
	// wrong elements of each algorithm, then its time in each round.
	stats := make([]float64, k*(1+cfg.rounds))
	for i, call := range calls {
		b.fill()
		for range cfg.warmup {
			if err := call(ctx); err != nil {
				return nil, results[i].fail(err)
			}
		}
		if cfg.check {
			b.fill()
			if err := call(ctx); err != nil {
				return nil, results[i].fail(err)
			}
			stats[i] = float64(b.verify())
		}
	}
	for round := range cfg.rounds {
		for j := range k {
			i := (round + j) % k
			b.fill()
			if err := c.Barrier(ctx); err != nil {
				return nil, err
			}
			start := time.Now()
			for range cfg.iters {
				if err := calls[i](ctx); err != nil {
					return nil, results[i].fail(err)
				}
			}
			stats[k+i*cfg.rounds+round] = time.Since(start).Seconds() / float64(cfg.iters)
		}
	}
	if err := toRoot(ctx, c, stats, k); err != nil {
		return nil, err
	}
	if c.Rank() != 0 {
		return results, nil // the figures are rank 0's
	}
	for i := range results {
		results[i].wrong = stats[i]
		results[i].seconds = median(stats[k+i*cfg.rounds : k+(i+1)*cfg.rounds])
	}
	return results, nil
}

// fail says which algorithm failed, when the list has several.
func (r result) fail(err error) error { return fmt.Errorf("%s: %w", r.algo, err) }

// median returns the middle of xs (the lower one of an even count), which
// it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}

// blocked reports whether op's buffer is p blocks, one per rank.
func blocked(op string) bool {
	switch op {
	case "allgather", "reducescatter", "alltoall", "gather", "scatter":
		return true
	}
	return false
}

// statsTag is the point-to-point tag on which ranks report to rank 0.
const statsTag = 7

// toRoot combines the ranks' figures on rank 0, by point-to-point
// messages so that they never depend on the collectives under test: the
// first wrong of them are counts of wrong elements, which it sums; the
// rest are times, of which it keeps the largest (the slowest rank's).
func toRoot(ctx context.Context, c *spmd.Comm, stats []float64, wrong int) error {
	msg := make([]byte, 8*len(stats))
	if c.Rank() != 0 {
		for i, v := range stats {
			binary.LittleEndian.PutUint64(msg[8*i:], math.Float64bits(v))
		}
		return c.Send(ctx, 0, statsTag, msg)
	}
	for src := 1; src < c.Size(); src++ {
		if _, err := c.Recv(ctx, src, statsTag, msg); err != nil {
			return err
		}
		for i := range stats {
			v := math.Float64frombits(binary.LittleEndian.Uint64(msg[8*i:]))
			if i < wrong {
				stats[i] += v
			} else {
				stats[i] = max(stats[i], v)
			}
		}
	}
	return nil
}
