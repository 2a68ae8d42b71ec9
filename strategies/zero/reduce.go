package zero

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// reduction is one unit's gradient reduction in flight.
type reduction struct {
	u     *unit
	req   interface{ Wait(context.Context) error }
	buf32 []float32       // the temporary it reduces (stages 2-3, fp32)
	buf16 []compress.BF16 // (stages 2-3, bf16)
	first bool            // the step's first: it sets the chunk's gradients instead of adding
}

// reduce hands u's gradients, complete for this micro-batch, to the
// shard group: at stages 2 and 3 after every micro-batch, into each
// owner's chunk; at stages 0 and 1 after the last, in place.
func (z *Zero) reduce(u *unit) {
	stage, mixed := z.cfg.Stage, z.cfg.Mixed
	full := z.n * u.s
	red := &reduction{u: u, first: z.first}
	switch {
	case stage < 2 && !mixed:
		if !z.last {
			return
		}
		red.req = z.reduceScatter32(u.g, u.g[z.r*u.s:(z.r+1)*u.s], u)
	case stage < 2:
		g := u.grad32
		if z.first {
			compress.EncodeBF16(u.gb, g)
		} else {
			compress.AccumulateBF16(u.gb[:len(g)], g)
		}
		z.pool.put32(g)
		u.grad32 = nil
		u.bind(false, nil)
		if !z.last {
			return
		}
		red.req = z.reduceScatter16(u.gb, u.gb[z.r*u.s:(z.r+1)*u.s], u)
	case !mixed:
		buf := u.grad32
		u.grad32 = nil
		u.bind(false, nil)
		red.buf32 = buf
		// The step's first reduction lands in the chunk's gradients; a
		// later one in buf's own block, which retire adds to them.
		recv := buf[z.r*u.s : (z.r+1)*u.s]
		if z.first {
			recv = u.g
		}
		red.req = z.reduceScatter32(buf, recv, u)
	default:
		buf := z.pool.get16(full, false)
		compress.EncodeBF16(buf, u.grad32)
		clear(buf[u.Len():])
		z.pool.put32(u.grad32)
		u.grad32 = nil
		u.bind(false, nil)
		red.buf16 = buf
		recv := buf[z.r*u.s : (z.r+1)*u.s]
		if z.first {
			recv = u.gb
		}
		red.req = z.reduceScatter16(buf, recv, u)
	}
	z.inflight = append(z.inflight, red)
	for len(z.inflight) > z.cfg.MaxInFlight {
		if err := z.retire(); err != nil {
			panic(nn.Abort{Err: err})
		}
	}
}

// reduceScatter32 reduces buf (a padded unit) into recv, this rank's
// chunk of it (buf's own block, or the chunk's gradients), then across
// the replica group.
func (z *Zero) reduceScatter32(buf, recv []float32, u *unit) waiter {
	if z.CodecActive() {
		return z.compressed(buf, recv, u)
	}
	return reduceScatter(z, buf, recv, u, prims.Sum[float32]())
}

// compressed is reduceScatter32 through Config.Compress, keyed by the
// unit, where the codec has work (CodecActive): with hybrid sharding, the
// host's exact reduce-scatter and then the codec's all-reduce of the
// chunk across hosts; at stage 0 (and with one rank a host) the codec's
// all-reduce of the unit; else the codec's reduce-scatter over the shard
// group, or its all-reduce of the unit and the chunk kept. The codec's
// collectives run one at a time on the chain, in the order the units
// were reduced, which is the same on every rank.
func (z *Zero) compressed(buf, recv []float32, u *unit) waiter {
	codec, key := z.cfg.Compress, u.index
	if z.n > 1 && z.rep != nil {
		req := prims.IReduceScatter(z.ctx, z.shard, buf, recv, prims.Sum[float32]())
		return z.chain.then(z.ctx, req, func(ctx context.Context, c *spmd.Comm) error {
			return z.count(codec.AllReduce(ctx, c, key, recv[:u.chunkLen()], u.csegs))
		})
	}
	if z.n == 1 { // CodecActive: a replica group of more than this rank
		copy(recv, buf[:u.s])
		return z.chain.then(z.ctx, done{}, func(ctx context.Context, c *spmd.Comm) error {
			return z.count(codec.AllReduce(ctx, c, key, recv[:u.Len()], u.segs))
		})
	}
	return z.chain.then(z.ctx, done{}, func(ctx context.Context, c *spmd.Comm) error {
		if rs, ok := codec.(compress.ReduceScatterer); ok {
			return z.count(rs.ReduceScatter(ctx, c, key, buf, recv, u.segs))
		}
		// The padding stays out of the codec (sign's error feedback
		// would fill it) and out of recv.
		if err := z.count(codec.AllReduce(ctx, c, key, buf[:u.Len()], u.segs)); err != nil {
			return err
		}
		copy(recv, buf[u.cl:u.ch])
		clear(recv[u.chunkLen():])
		return nil
	})
}

// CodecActive reports whether Config.Compress has work: a codec is set
// and some gradient reduction crosses ranks through it. It has none with
// one rank, and none with hybrid sharding on one host, whose
// reduce-scatter stays exact: the gradients are then reduced exactly (or
// not at all), as a PyTorch DDP communication hook has nothing to
// compress at world size 1. An idle codec moves no bytes (Compression is
// zero), a save carries no state of it, and a load drops the state a
// checkpoint carries.
func (z *Zero) CodecActive() bool {
	return z.cfg.Compress != nil && (z.rep != nil || !z.cfg.Hybrid && z.n > 1)
}

// count adds a codec call's bytes to the driver's.
func (z *Zero) count(st compress.Stats, err error) error {
	z.codecMu.Lock()
	z.codec.Add(st)
	z.codecMu.Unlock()
	return err
}

// Compression returns what Config.Compress has moved since New; zero
// without it.
func (z *Zero) Compression() compress.Stats {
	z.codecMu.Lock()
	defer z.codecMu.Unlock()
	return z.codec
}

func (z *Zero) reduceScatter16(buf, recv []compress.BF16, u *unit) waiter {
	return reduceScatter(z, buf, recv, u, z.add16)
}

func reduceScatter[T spmd.Number](z *Zero, buf, recv []T, u *unit, op prims.Op[T]) waiter {
	if z.n == 1 {
		copy(recv, buf[:u.s]) // nothing to reduce within the group: a no-op in place
		if z.rep == nil {
			return done{}
		}
		return prims.IAllReduce(z.ctx, z.rep, recv, op)
	}
	req := prims.IReduceScatter(z.ctx, z.shard, buf, recv, op)
	if z.chain == nil {
		return req
	}
	return z.chain.then(z.ctx, req, func(ctx context.Context, c *spmd.Comm) error {
		return prims.AllReduce(ctx, c, recv, op)
	})
}

type waiter = interface{ Wait(context.Context) error }

// done is a reduction with nothing to wait for.
type done struct{}

func (done) Wait(context.Context) error { return nil }

// retire waits for the oldest reduction in flight and keeps its result.
func (z *Zero) retire() error {
	red := z.inflight[0]
	z.inflight = z.inflight[1:]
	u := red.u
	err := red.req.Wait(z.ctx)
	if err == nil {
		lo, hi := z.r*u.s, z.r*u.s+u.s
		switch {
		case red.first: // reduced into the chunk's gradients
		case red.buf32 != nil:
			addTo(u.g, red.buf32[lo:hi])
		case red.buf16 != nil:
			compress.AddBF16(u.gb, red.buf16[lo:hi])
		}
	}
	if err != nil { // its buffer is dropped, as a failed gather's
		return fmt.Errorf("zero: reducing the gradients of unit %s: %w", u.Name, err)
	}
	z.pool.put32(red.buf32)
	z.pool.put16(red.buf16)
	return nil
}

// drain waits for every reduction and gather in flight, keeping the first
// error: after it no collective of this rank's uses a temporary.
func (z *Zero) drain() error {
	var err error
	for len(z.inflight) > 0 {
		if e := z.retire(); e != nil && err == nil {
			err = e
		}
	}
	for _, u := range z.units {
		if u.gather != nil {
			e := u.gather.Wait(z.ctx)
			if e != nil && err == nil {
				err = fmt.Errorf("zero: gathering unit %s: %w", u.Name, e)
			}
			if e == nil {
				z.pool.put32(u.gbuf32)
				z.pool.put16(u.gbuf16)
			}
			u.gather = nil
			u.gbuf32, u.gbuf16 = nil, nil
		}
		if u.grad32 != nil {
			z.pool.put32(u.grad32)
			u.grad32 = nil
		}
		z.release(u)
	}
	return err
}

func addTo(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}
