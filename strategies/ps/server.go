package ps

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gorun-hpc/gorun/spmd"
)

// server is a server rank's state. Its fields are the Serve loop's alone,
// except what the receivers hand over through channels.
type server struct {
	d      *PS
	lo, hi int
	w      []float32 // the shard: the model's own buffer's range
	opt    interface{ Step(w, g []float32) }

	applied int
	clock   []int      // pushes received, per worker
	replied []int      // the clock each worker's last reply answered
	slots   [][][]byte // [step % window][worker] -> push message, nil while awaited
	have    []int      // per slot, pushes held
	free    []chan []byte
	sum     []float32
	out     [][]byte
	sends   []*spmd.Request

	maxLead int // the most any worker's clock led the applied steps
}

// push is a message a receiver took, for the Serve loop.
type push struct {
	worker int
	msg    []byte
}

func (d *PS) startServer(ctx context.Context, newOpt NewOptimizer) error {
	k := d.comm.Rank()
	lo, hi := d.shards[k][0], d.shards[k][1]
	st := d.model.Store()
	opt, err := newOpt(st.Params, lo, hi)
	if err != nil {
		return fmt.Errorf("ps: server %d: %w", k, err)
	}
	nw, window := d.Workers(), d.cfg.Staleness+1
	s := &server{d: d, lo: lo, hi: hi, w: st.W[lo:hi], opt: opt,
		clock: make([]int, nw), replied: make([]int, nw), have: make([]int, window),
		free: make([]chan []byte, nw), sum: make([]float32, hi-lo),
		out: make([][]byte, nw), sends: make([]*spmd.Request, nw)}
	s.slots = make([][][]byte, window)
	for i := range s.slots {
		s.slots[i] = make([][]byte, nw)
	}
	for w := range s.free {
		s.free[w] = make(chan []byte, window)
		for range window {
			s.free[w] <- newMsg(hi - lo)
		}
		s.out[w] = newMsg(hi - lo)
	}
	d.srv = s
	for w := range nw {
		s.reply(ctx, w)
	}
	return nil
}

// Serve runs a server until every worker has pushed cfg.Steps steps and
// has its reply to the last. onStep, if not nil, gets each step's mean
// loss over the workers as the step is applied. It returns an error on a
// worker or a server; an error wrapping spmd.ErrPeerLost names the rank.
func (d *PS) Serve(ctx context.Context, onStep func(step int, loss float32)) error {
	s := d.srv
	if s == nil {
		return fmt.Errorf("ps: rank %d is a worker, not a server", d.comm.Rank())
	}
	rctx, stop := context.WithCancel(ctx)
	in, errs := make(chan push), make(chan error, d.Workers())
	var wg sync.WaitGroup
	for w := range d.Workers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.receive(rctx, w, in, errs)
		}()
	}
	err := s.loop(ctx, in, errs, onStep)
	stop()
	wg.Wait()
	for _, r := range s.sends {
		if r != nil {
			if _, werr := r.Wait(ctx); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	return err
}

// receive takes worker w's pushes, each into a buffer the loop freed.
func (s *server) receive(ctx context.Context, w int, in chan<- push, errs chan<- error) {
	src := s.d.cfg.Servers + w
	for n := 0; n < s.d.cfg.Steps; n++ {
		var msg []byte
		select {
		case msg = <-s.free[w]:
		case <-ctx.Done():
			return
		}
		if _, err := s.d.comm.Recv(ctx, src, pushTag, msg); err != nil {
			if ctx.Err() == nil {
				errs <- fmt.Errorf("ps: server %d: push from rank %d: %w", s.d.comm.Rank(), src, err)
			}
			return
		}
		select {
		case in <- push{w, msg}:
		case <-ctx.Done():
			return
		}
	}
}

func (s *server) loop(ctx context.Context, in <-chan push, errs <-chan error, onStep func(int, float32)) error {
	steps := s.d.cfg.Steps
	for s.applied < steps || !s.allReplied() {
		select {
		case p := <-in:
			step := s.clock[p.worker]
			s.clock[p.worker]++
			s.maxLead = max(s.maxLead, s.clock[p.worker]-s.applied)
			slot := step % len(s.slots)
			s.slots[slot][p.worker] = p.msg
			s.have[slot]++
			for s.applied < steps && s.have[s.applied%len(s.slots)] == s.d.Workers() {
				loss := s.apply()
				if onStep != nil {
					onStep(s.applied-1, loss)
				}
			}
			s.replyDue(ctx)
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("ps: server %d: %w", s.d.comm.Rank(), context.Cause(ctx))
		}
	}
	return nil
}

// apply runs the optimizer on the mean of the workers' gradients for the
// next step, summed in worker order, and frees their buffers.
func (s *server) apply() float32 {
	slot := s.applied % len(s.slots)
	clear(s.sum)
	var loss float64
	for w, msg := range s.slots[slot] {
		loss += getF64(msg)
		for i, g := range f32s(msg[header:]) {
			s.sum[i] += g
		}
		s.slots[slot][w] = nil
		s.free[w] <- msg
	}
	s.have[slot] = 0
	nw := float32(s.d.Workers())
	for i := range s.sum {
		s.sum[i] /= nw
	}
	s.opt.Step(s.w, s.sum)
	s.applied++
	return float32(loss / float64(nw))
}

// replyDue answers each worker whose next step may use the applied
// parameters: one that has pushed t steps is answered once t - applied
// is within the staleness bound.
func (s *server) replyDue(ctx context.Context) {
	for w, c := range s.clock {
		if c > s.replied[w] && c-s.applied <= s.d.cfg.Staleness {
			s.replied[w] = c
			s.reply(ctx, w)
		}
	}
}

func (s *server) allReplied() bool {
	for w, c := range s.clock {
		if c < s.d.cfg.Steps || s.replied[w] < c {
			return false
		}
	}
	return true
}

// reply sends worker w the shard and its version. The worker has taken
// the previous reply before pushing again, so that send is done or nearly.
func (s *server) reply(ctx context.Context, w int) {
	if r := s.sends[w]; r != nil {
		r.Wait(ctx) // its error, if any, shows again in the next send's
	}
	msg := s.out[w]
	putF64(msg, float64(s.applied))
	copy(f32s(msg[header:]), s.w)
	s.sends[w] = s.d.comm.Isend(ctx, s.d.cfg.Servers+w, replyTag, msg)
}

// MaxLead is, on a server, the most steps any worker's pushes ran ahead
// of the steps applied (at most Staleness+1).
func (d *PS) MaxLead() int {
	if d.srv == nil {
		return 0
	}
	return d.srv.maxLead
}
