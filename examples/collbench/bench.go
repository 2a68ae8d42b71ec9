package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"
	"unsafe"

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

func runType[T elem](ctx context.Context, w *spmd.World, cfg config, out io.Writer) error {
	if w.Rank() == 0 {
		fmt.Fprintf(out, "# collbench: %d ranks, %d iterations after %d warm-up, check %v\n", w.Size(), cfg.iters, cfg.warmup, cfg.check)
		fmt.Fprintln(out, header)
	}
	wrongAll := 0.0
	var mem arena[T]
	mem.reserve(max(w.Size(), cfg.maxBytes/int(unsafe.Sizeof(T(0)))))
	for _, op := range cfg.ops {
		for size := cfg.minBytes; size <= cfg.maxBytes; size *= cfg.factor {
			r, err := measure(ctx, w.Comm, cfg, &mem, op, size)
			if err != nil {
				return fmt.Errorf("%s of %d bytes on rank %d: %w", op, size, w.Rank(), err)
			}
			if w.Rank() == 0 {
				r.print(out, cfg)
			}
			wrongAll += r.wrong
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
	seconds        float64 // mean time of one call on the slowest rank
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

// measure runs one size of one collective.
func measure[T elem](ctx context.Context, c *spmd.Comm, cfg config, mem *arena[T], op string, size int) (result, error) {
	var zero T
	esize := int(unsafe.Sizeof(zero))
	p := c.Size()
	count := max(1, size/esize)
	if blocked(op) {
		count = max(p, count/p*p)
	}
	coll, err := topo.ParseCollective(op)
	if err != nil {
		return result{}, err
	}
	algo := topo.Algo(cfg.algo)
	if algo == "" {
		if algo, err = topo.Choose(ctx, c, coll, count*esize); err != nil {
			return result{}, err
		}
	} else if algo, err = topo.ParseAlgo(cfg.algo); err != nil {
		return result{}, err
	}
	b := newBufs(mem, op, c.Rank(), p, count, cfg.redop)
	call := caller(op, cfg.redop, algo, c, b)
	r := result{op: op, typ: cfg.typ, redop: cfg.redop, np: p, bytes: count * esize, count: count, algo: algo}

	b.fill()
	for range cfg.warmup {
		if err := call(ctx); err != nil {
			return r, err
		}
	}
	wrong := 0
	if cfg.check {
		b.fill()
		if err := call(ctx); err != nil {
			return r, err
		}
		wrong = b.verify()
	}
	b.fill()
	if err := c.Barrier(ctx); err != nil {
		return r, err
	}
	start := time.Now()
	for range cfg.iters {
		if err := call(ctx); err != nil {
			return r, err
		}
	}
	mean := time.Since(start).Seconds() / float64(cfg.iters)
	r.seconds, r.wrong, err = toRoot(ctx, c, mean, float64(wrong))
	return r, err
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

// toRoot returns, on rank 0, the largest of the ranks' times and the sum
// of their wrong counts, by point-to-point messages so that the figures
// never depend on the collectives under test.
func toRoot(ctx context.Context, c *spmd.Comm, seconds, wrong float64) (float64, float64, error) {
	msg := make([]byte, 16)
	if c.Rank() != 0 {
		binary.LittleEndian.PutUint64(msg, math.Float64bits(seconds))
		binary.LittleEndian.PutUint64(msg[8:], math.Float64bits(wrong))
		return 0, 0, c.Send(ctx, 0, statsTag, msg)
	}
	for src := 1; src < c.Size(); src++ {
		if _, err := c.Recv(ctx, src, statsTag, msg); err != nil {
			return 0, 0, err
		}
		seconds = max(seconds, math.Float64frombits(binary.LittleEndian.Uint64(msg)))
		wrong += math.Float64frombits(binary.LittleEndian.Uint64(msg[8:]))
	}
	return seconds, wrong, nil
}
