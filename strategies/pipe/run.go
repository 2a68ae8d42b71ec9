package pipe

import (
	"context"
	"fmt"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// Stage is one rank's side of a pipeline: the model chunks it holds
// (chunk c lives on rank c % Stages). The executor calls it from one
// goroutine, in the order of the rank's schedule.
type Stage interface {
	// Forward runs micro-batch mb through chunk. in is the previous
	// chunk's output, nil for chunk 0 (which reads its micro-batch
	// itself), and is valid only during the call. It returns the
	// chunk's output for the next chunk (nil from the last chunk), which
	// the executor copies before it runs another operation.
	Forward(ctx context.Context, chunk, mb int, in []float32) (out []float32, err error)
	// Backward runs micro-batch mb backwards through chunk. dout is the
	// gradient of the chunk's output, nil for the last chunk (which
	// starts from its loss), and is valid only during the call. It
	// returns the gradient of the chunk's input, nil from chunk 0.
	Backward(ctx context.Context, chunk, mb int, dout []float32) (din []float32, err error)
}

// Event is one operation as the executor ran it: times are since Run
// began, and Wait is how long the operation waited for its input before
// it could start.
type Event struct {
	Op               Op
	Start, End, Wait time.Duration
}

// Config is how Run runs a schedule.
type Config struct {
	Schedule *Schedule
	// Len is the number of floats of an activation, and of its
	// gradient, between two chunks: every message has that length.
	Len int
	// Observe, if set, sees each operation after it ran.
	Observe func(Event)
}

// Run runs this rank's part of the schedule: comm's rank r runs
// Ops[r], receiving each operation's input from the rank of the chunk
// before (a forward) or after (a backward) and sending its output on,
// with Isend and Irecv, so that messages travel while the rank computes:
// the receive of the next operation's input is posted before the current
// one runs, and a send is waited for only when the step ends. comm must
// have Schedule.Stages ranks; every rank calls Run with the same
// schedule. An error (a lost peer, a failed stage, ctx ended) ends the
// rank's run at once; the neighbours waiting for its messages then fail
// too, with spmd.ErrPeerLost once it has closed its world.
func Run(ctx context.Context, comm *spmd.Comm, cfg Config, st Stage) error {
	s := cfg.Schedule
	if comm.Size() != s.Stages {
		return fmt.Errorf("pipe: a schedule of %d stages run on a communicator of %d ranks: build the pipeline communicator with one rank per stage", s.Stages, comm.Size())
	}
	x := &executor{ctx: ctx, comm: comm, cfg: cfg, s: s, st: st, rank: comm.Rank(), t0: time.Now(), local: map[int][]float32{}}
	return x.run()
}

type executor struct {
	ctx   context.Context
	comm  *spmd.Comm
	cfg   Config
	s     *Schedule
	st    Stage
	rank  int
	t0    time.Time
	free  [][]float32 // message buffers
	sends []pending
	local map[int][]float32 // messages between two chunks of this rank, by tag
}

type pending struct {
	req *spmd.Request
	buf []float32
}

// posted is the receive of an operation's input.
type posted struct {
	req *spmd.Request
	buf []float32
	tag int
}

func (x *executor) run() error {
	ops := x.s.Ops[x.rank]
	var next *posted
	if len(ops) > 0 {
		next = x.post(ops[0])
	}
	for i, op := range ops {
		cur := next
		next = nil
		if i+1 < len(ops) {
			next = x.post(ops[i+1])
		}
		if err := x.do(op, cur); err != nil {
			return fmt.Errorf("pipe: stage %d, %v: %w", x.rank, op, err)
		}
		if err := x.reap(); err != nil {
			return fmt.Errorf("pipe: stage %d: sending: %w", x.rank, err)
		}
	}
	for _, p := range x.sends {
		if _, err := p.req.Wait(x.ctx); err != nil {
			return fmt.Errorf("pipe: stage %d: sending: %w", x.rank, err)
		}
	}
	x.sends = x.sends[:0]
	return nil
}

// from returns the chunk whose message op needs, and whether it needs one.
func (x *executor) from(op Op) (chunk int, ok bool) {
	if op.Kind == Forward {
		return op.Chunk - 1, op.Chunk > 0
	}
	return op.Chunk + 1, op.Chunk < x.s.Chunks()-1
}

// to returns the chunk op's result goes to, and whether it goes anywhere.
func (x *executor) to(op Op) (chunk int, ok bool) {
	if op.Kind == Forward {
		return op.Chunk + 1, op.Chunk < x.s.Chunks()-1
	}
	return op.Chunk - 1, op.Chunk > 0
}

// tag names the message that carries op's input: the kind, the chunk it
// enters and the micro-batch, unique within a step.
func (x *executor) tag(op Op) int {
	return (int(op.Kind-1)*x.s.Chunks()+op.Chunk)*x.s.Micro + op.MB
}

// post posts the receive of op's input, if it needs one from another rank.
func (x *executor) post(op Op) *posted {
	c, ok := x.from(op)
	if !ok {
		return nil
	}
	p := &posted{tag: x.tag(op)}
	if src := x.s.Rank(c); src != x.rank {
		p.buf = x.buffer()
		p.req = spmd.IrecvSlice(x.comm, src, p.tag, p.buf)
	}
	return p
}

func (x *executor) do(op Op, in *posted) error {
	t0 := time.Since(x.t0)
	var input []float32
	if in != nil {
		if in.req != nil {
			n, err := in.req.Wait(x.ctx)
			if err != nil {
				return err
			}
			if n != 4*x.cfg.Len {
				return fmt.Errorf("a message of %d bytes where %d were expected: every rank must run the same model and micro-batch shape", n, 4*x.cfg.Len)
			}
			input = in.buf
		} else {
			input = x.local[in.tag]
			delete(x.local, in.tag)
		}
	}
	start := time.Since(x.t0)
	name := "pipe forward"
	if op.Kind == Backward {
		name = "pipe backward"
	}
	span := trace.Region(x.ctx, name)
	var out []float32
	var err error
	if op.Kind == Forward {
		out, err = x.st.Forward(x.ctx, op.Chunk, op.MB, input)
	} else {
		out, err = x.st.Backward(x.ctx, op.Chunk, op.MB, input)
	}
	span.End()
	if in != nil && in.req != nil {
		x.free = append(x.free, in.buf)
	}
	if err != nil {
		return err
	}
	if err := x.send(op, out); err != nil {
		return err
	}
	if x.cfg.Observe != nil {
		x.cfg.Observe(Event{Op: op, Start: start, End: time.Since(x.t0), Wait: start - t0})
	}
	return nil
}

// send sends op's result to the chunk that needs it.
func (x *executor) send(op Op, out []float32) error {
	c, ok := x.to(op)
	if !ok {
		return nil
	}
	if len(out) != x.cfg.Len {
		return fmt.Errorf("the stage returned %d floats where %d were expected", len(out), x.cfg.Len)
	}
	next := Op{Kind: op.Kind, Chunk: c, MB: op.MB}
	buf := x.buffer()
	copy(buf, out)
	dst := x.s.Rank(c)
	if dst == x.rank {
		x.local[x.tag(next)] = buf
		return nil
	}
	x.sends = append(x.sends, pending{req: spmd.IsendSlice(x.ctx, x.comm, dst, x.tag(next), buf), buf: buf})
	return nil
}

// reap takes back the buffers of the sends that have completed.
func (x *executor) reap() error {
	k := 0
	for _, p := range x.sends {
		if p.req.Test() {
			if _, err := p.req.Wait(x.ctx); err != nil {
				return err
			}
			x.free = append(x.free, p.buf)
			continue
		}
		x.sends[k] = p
		k++
	}
	x.sends = x.sends[:k]
	return nil
}

func (x *executor) buffer() []float32 {
	if n := len(x.free); n > 0 {
		b := x.free[n-1]
		x.free = x.free[:n-1]
		return b
	}
	return make([]float32, x.cfg.Len)
}
