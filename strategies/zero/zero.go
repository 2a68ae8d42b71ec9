package zero

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/topo"
)

// Zero is one rank's sharded data-parallel driver for a model. It is
// used by one goroutine: Step, or Forward for evaluation.
//
// The ranks form a grid of shard groups and replica groups. Each unit of
// the model (nn.Unit: a layer, a transformer block) is padded to a
// multiple of the shard group's size n and cut into n equal chunks; rank r
// of the group owns chunk r of every unit: its optimizer state (stage 1
// and up), its gradients (2 and up) and its parameters (3). Without
// Hybrid the shard group is every rank; with it, the ranks of one host;
// at stage 0 each rank alone. The replica groups join the ranks that own
// the same chunks: their gradients are all-reduced.
type Zero struct {
	cfg   Config
	model nn.Model
	st    *nn.Store
	comm  *spmd.Comm // a duplicate of New's communicator: losses, barriers, checkpoints
	shard *spmd.Comm // the shard group
	rep   *spmd.Comm // the replica group; nil when it is this rank alone
	world int        // every rank: gradients are averaged over it
	n, r  int        // the shard group's size and this rank's place in it
	units []*unit
	mem   Memory
	pool  *pool
	add16 prims.Op[compress.BF16]

	// One pass's state.
	ctx      context.Context
	inStep   bool
	first    bool // the step's first micro-batch: gradients start from zero
	last     bool // its last: the reductions of stages 0 and 1 run
	inflight []*reduction
	chain    *chain // hybrid stage 1-3: all-reduces after the reduce-scatters
	crash    func() // see CrashAfterShard
	calls    [4]int // unit hook calls by phase in this pass, to check the model's
}

// unit is one nn.Unit and what this rank keeps of it.
type unit struct {
	nn.Unit
	index  int
	s      int // chunk length: Len padded to a multiple of n, over n
	cl, ch int // this rank's chunk, relative to the unit: [cl, ch), may be empty

	w      []float32       // fp32 parameters: the whole padded unit (stages 0-2) or the chunk, padded to s (3)
	wb     []compress.BF16 // the same in bf16 (Mixed)
	master []float32       // Mixed: the fp32 chunk the optimizer updates
	g      []float32       // fp32 gradients: the whole padded unit (0-1) or the chunk (2-3)
	gb     []compress.BF16 // the same in bf16 (Mixed)
	opt    nn.Optimizer    // over the chunk; nil when it is empty

	updated *prims.Request // stages 1-2: the unit being gathered after an update
	gather  *prims.Request // stage 3: the unit's parameters being gathered
	gbuf32  []float32      // its buffer (fp32)
	gbuf16  []compress.BF16
	compute []float32 // the fp32 parameters the layers read, when they are a temporary
	grad32  []float32 // the fp32 gradients the layers add to, when they are a temporary
}

// chunkLen is the number of elements of this rank's chunk.
func (u *unit) chunkLen() int { return u.ch - u.cl }

// bind points the unit's parameters' views at buf (the unit's elements
// from 0), or at nothing when buf is nil.
func (u *unit) bind(w bool, buf []float32) {
	for _, p := range u.Params {
		var v []float32
		if buf != nil {
			o := p.Offset - u.Lo
			v = buf[o : o+p.Len() : o+p.Len()]
		}
		if w {
			p.W = v
		} else {
			p.G = v
		}
	}
}

// abort carries an error out of a unit hook, through the model's pass,
// to the driver's call that ran it.
type abort struct{ err error }

// New makes a driver on comm, which every rank of comm calls with a model
// of the same layout. It broadcasts rank 0's parameters, then keeps of the
// model only what its stage keeps: from then on the driver owns the
// parameters' views (nn.Param's W and G), which at stage 3 and in mixed
// precision are valid only while their unit runs. The model's own flat
// buffers are let go (the Store's W and G become nil).
func New(ctx context.Context, comm *spmd.Comm, model nn.Model, cfg Config) (z *Zero, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	st := model.Store()
	if st.W == nil {
		return nil, fmt.Errorf("zero: the model's parameters belong to another driver already: build a new model")
	}
	c, err := comm.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("zero: %w", err)
	}
	z = &Zero{cfg: cfg, model: model, st: st, comm: c, world: c.Size(), add16: prims.OpFunc(compress.AddBF16)}
	defer func() {
		if err != nil {
			z.Close()
		}
	}()
	if err := agreeSize(ctx, c, len(st.W), len(st.Units)); err != nil {
		return nil, err
	}
	// In pieces, so that the collective's scratch, which a communicator
	// keeps for its next calls, stays small beside the shards.
	for lo := 0; lo < len(st.W); lo += broadcastPiece {
		if err := prims.Broadcast(ctx, c, st.W[lo:min(lo+broadcastPiece, len(st.W))], 0); err != nil {
			return nil, fmt.Errorf("zero: broadcasting rank 0's parameters: %w", err)
		}
	}
	if err := z.groups(ctx); err != nil {
		return nil, err
	}
	z.pool = newPool(&z.mem)
	z.n, z.r = z.shard.Size(), z.shard.Rank()
	for i, nu := range st.Units {
		u, err := z.newUnit(i, nu)
		if err != nil {
			return nil, err
		}
		z.units = append(z.units, u)
	}
	z.mem.Peak = z.mem.Total()
	// The driver's buffers hold everything now: let the model's go.
	st.W, st.G = nil, nil
	if cfg.Stage == 3 || cfg.Mixed {
		for _, u := range z.units {
			u.bind(true, nil)
		}
	}
	if cfg.Stage >= 2 || cfg.Mixed {
		for _, u := range z.units {
			u.bind(false, nil)
		}
	}
	st.OnUnit(z.hook)
	if z.rep != nil && z.n > 1 {
		z.chain = newChain(z.rep)
	}
	return z, nil
}

// broadcastPiece is the most elements New broadcasts in one call (4 MiB).
const broadcastPiece = 1 << 20

// agreeSize fails every rank if the ranks' models differ.
func agreeSize(ctx context.Context, c *spmd.Comm, n, units int) error {
	lim := []int64{int64(n), -int64(n), int64(units), -int64(units)}
	if err := prims.AllReduce(ctx, c, lim, prims.Max[int64]()); err != nil {
		return fmt.Errorf("zero: comparing models: %w", err)
	}
	if lim[0] != -lim[1] || lim[2] != -lim[3] {
		return fmt.Errorf("zero: the ranks' models differ: %d to %d parameters in %d to %d units (this rank %d in %d); every rank must build the same model", -lim[1], lim[0], -lim[3], lim[2], n, units)
	}
	return nil
}

// groups makes the shard and replica groups.
func (z *Zero) groups(ctx context.Context) error {
	c := z.comm
	switch {
	case z.cfg.Stage == 0:
		// Each rank is its own shard group; one replica group of all.
		s, err := c.Split(ctx, c.Rank(), 0)
		if err != nil {
			return fmt.Errorf("zero: %w", err)
		}
		z.shard = s
		if c.Size() > 1 {
			z.rep = c
		}
		return nil
	case !z.cfg.Hybrid:
		z.shard = c
		return nil
	}
	l := topo.Detect(c)
	per := len(l.Hosts[0])
	for h, rs := range l.Hosts {
		if len(rs) != per {
			return fmt.Errorf("zero: hybrid sharding needs as many ranks on every host: host %s has %d, host %s %d", l.Names[0], per, l.Names[h], len(rs))
		}
	}
	host, local := l.Host(c.Rank()), 0
	for i, r := range l.LocalRanks(c.Rank()) {
		if r == c.Rank() {
			local = i
		}
	}
	s, err := c.Split(ctx, host, local)
	if err != nil {
		return fmt.Errorf("zero: the host's shard group: %w", err)
	}
	z.shard = s
	if len(l.Hosts) > 1 {
		rep, err := c.Split(ctx, local, host)
		if err != nil {
			return fmt.Errorf("zero: the replica group across hosts: %w", err)
		}
		z.rep = rep
	}
	return nil
}

// newUnit lays out what this rank keeps of unit i, from the model's
// buffers, and makes its chunk's optimizer.
func (z *Zero) newUnit(i int, nu nn.Unit) (*unit, error) {
	n, r, stage, mixed := z.n, z.r, z.cfg.Stage, z.cfg.Mixed
	u := &unit{Unit: nu, index: i, s: (nu.Len() + n - 1) / n}
	u.cl, u.ch = min(r*u.s, nu.Len()), min((r+1)*u.s, nu.Len())
	src := z.st.W[nu.Lo:nu.Hi]
	chunk := src[u.cl:u.ch]
	full := n * u.s
	switch {
	case stage < 3 && !mixed:
		u.w = make([]float32, full)
		copy(u.w, src)
		u.bind(true, u.w)
		z.mem.Params += int64(4 * full)
	case stage < 3:
		u.wb = make([]compress.BF16, full)
		compress.EncodeBF16(u.wb, src)
		z.mem.Params += int64(2 * full)
	case !mixed:
		u.w = make([]float32, u.s)
		copy(u.w, chunk)
		z.mem.Params += int64(4 * u.s)
	default:
		u.wb = make([]compress.BF16, u.s)
		compress.EncodeBF16(u.wb, chunk)
		z.mem.Params += int64(2 * u.s)
	}
	glen := full
	if stage >= 2 {
		glen = u.s
	}
	if mixed {
		u.gb = make([]compress.BF16, glen)
		z.mem.Grads += int64(2 * glen)
		// The master copy is the fp32 truth; bf16 rounded the parameters.
		u.master = append([]float32(nil), chunk...)
		z.mem.Optim += int64(4 * len(u.master))
	} else {
		u.g = make([]float32, glen)
		z.mem.Grads += int64(4 * glen)
		if stage < 2 {
			u.bind(false, u.g)
		}
	}
	if u.chunkLen() > 0 {
		opt, err := z.cfg.Optimizer(nu.Params, nu.Lo+u.cl, nu.Lo+u.ch)
		if err != nil {
			return nil, fmt.Errorf("zero: unit %s: %w", nu.Name, err)
		}
		u.opt = opt
		for _, s := range opt.State() {
			z.mem.Optim += int64(4*len(s.F32) + 8*len(s.I64))
		}
	}
	return u, nil
}

// Comm is the driver's own communicator (a duplicate of New's).
func (z *Zero) Comm() *spmd.Comm { return z.comm }

// Model is the model the driver runs.
func (z *Zero) Model() nn.Model { return z.model }

// Config is the driver's configuration.
func (z *Zero) Config() Config { return z.cfg }

// Memory reports what this rank holds for the model.
func (z *Zero) Memory() Memory { return z.mem }

// SetLR sets every optimizer's learning rate.
func (z *Zero) SetLR(lr float32) {
	for _, u := range z.units {
		if u.opt != nil {
			u.opt.SetLR(lr)
		}
	}
}

// Forward runs the model's forward pass alone, for evaluation: at stage
// 3 it gathers each unit's parameters as it runs.
func (z *Zero) Forward(ctx context.Context, b *nn.Batch, train bool) (loss float32, err error) {
	z.ctx = ctx
	defer z.recover(&err)
	return z.model.Forward(b, train)
}

func (z *Zero) recover(err *error) {
	if v := recover(); v != nil {
		a, ok := v.(abort)
		if !ok {
			panic(v)
		}
		*err = errors.Join(a.err, z.drain())
	}
}

// Step runs one optimizer step over this rank's micro-batches, each
// micro-batch's loss scaled by 1/len(micro) as dp.DDP.Step does, and
// returns this rank's mean loss. Afterwards every rank's parameters are
// the same update of the mean gradient over all ranks.
func (z *Zero) Step(ctx context.Context, micro []*nn.Batch) (loss float32, err error) {
	if len(micro) == 0 {
		return 0, fmt.Errorf("zero: a step needs at least one micro-batch")
	}
	defer trace.Region(ctx, "step").End()
	z.ctx, z.inStep = ctx, true
	defer func() { z.inStep = false }()
	defer z.recover(&err)
	if z.cfg.Stage < 2 && !z.cfg.Mixed {
		for _, u := range z.units {
			clear(u.g)
		}
	}
	k := float32(len(micro))
	var total float32
	for i, b := range micro {
		z.first, z.last = i == 0, i == len(micro)-1
		z.calls = [4]int{}
		fw := trace.Region(ctx, "forward")
		l, err := z.model.Forward(b, true)
		fw.End()
		if err != nil {
			return 0, errors.Join(fmt.Errorf("zero: %w", err), z.drain())
		}
		total += l
		bw := trace.Region(ctx, "backward")
		z.model.Backward(1 / k)
		bw.End()
		if err := z.checkCalls(); err != nil {
			return 0, errors.Join(err, z.drain())
		}
	}
	wait := trace.Region(ctx, "wait")
	err = z.drain()
	wait.End()
	if err != nil {
		return 0, err
	}
	if err := z.update(ctx); err != nil {
		return 0, err
	}
	return total / k, nil
}

// hook is the Store's unit hook: it gathers, frees and reduces units as
// the model's passes run them.
func (z *Zero) hook(i int, ph nn.Phase) {
	u := z.units[i]
	z.calls[ph]++
	switch ph {
	case nn.BeforeForward:
		// The next unit's gather goes into the queue behind this one's,
		// before this one is waited for.
		if z.cfg.Stage == 3 && !z.cfg.NoPrefetch && i+1 < len(z.units) {
			z.prefetch(u)
			z.prefetch(z.units[i+1])
		}
		z.materialize(u)
	case nn.AfterForward:
		z.release(u)
	case nn.BeforeBackward:
		if !z.inStep {
			panic(abort{fmt.Errorf("zero: the model's Backward ran outside Step: train through Zero.Step")})
		}
		if z.cfg.Stage == 3 && !z.cfg.NoPrefetch && i > 0 {
			z.prefetch(u)
			z.prefetch(z.units[i-1])
		}
		z.materialize(u)
		switch {
		case z.cfg.Stage >= 2 && !z.cfg.Mixed:
			// Padded: the reduce-scatter runs on it in place.
			u.grad32 = z.pool.get32(z.n*u.s, true)
			u.bind(false, u.grad32)
		case z.cfg.Mixed:
			u.grad32 = z.pool.get32(u.Len(), true)
			u.bind(false, u.grad32)
		}
	case nn.AfterBackward:
		z.release(u)
		z.reduce(u)
	}
}

// checkCalls says whether the model called the unit hook around every
// unit in its forward and backward pass: a model that does not would
// train on unreduced gradients.
func (z *Zero) checkCalls() error {
	for ph, n := range z.calls {
		if n != len(z.units) {
			return fmt.Errorf("zero: the model called the unit hook %s %d times for its %d units (%s): a model must call its Store's Enter around each unit's forward and backward, as nn's models do", nn.Phase(ph), n, len(z.units), unitNames(z.units))
		}
	}
	return nil
}

func unitNames(us []*unit) string {
	names := make([]string, 0, len(us))
	for _, u := range us {
		names = append(names, u.Name)
	}
	if len(names) > 6 {
		names = append(names[:5:5], "...", names[len(names)-1])
	}
	return strings.Join(names, ", ")
}

// prefetch starts gathering u's parameters (stage 3).
func (z *Zero) prefetch(u *unit) {
	if u.gather != nil {
		return
	}
	full := z.n * u.s
	if z.cfg.Mixed {
		u.gbuf16 = z.pool.get16(full, false)
		u.gather = prims.IAllGather(z.ctx, z.shard, u.wb, u.gbuf16)
	} else {
		u.gbuf32 = z.pool.get32(full, false)
		u.gather = prims.IAllGather(z.ctx, z.shard, u.w, u.gbuf32)
	}
}

// materialize makes u's fp32 parameters readable by the layers.
func (z *Zero) materialize(u *unit) {
	if err := z.awaitUpdate(z.ctx, u); err != nil {
		panic(abort{err})
	}
	if z.cfg.Stage < 3 && !z.cfg.Mixed {
		return // bound for good
	}
	src := u.wb
	if z.cfg.Stage == 3 {
		z.prefetch(u)
		r := trace.Region(z.ctx, "gather")
		err := u.gather.Wait(z.ctx)
		r.End()
		u.gather = nil
		if err != nil {
			// A failed collective may still have receives pending into
			// its buffer: it is dropped, not pooled.
			u.gbuf32, u.gbuf16 = nil, nil
			panic(abort{fmt.Errorf("zero: gathering unit %s: %w", u.Name, err)})
		}
		if !z.cfg.Mixed {
			u.bind(true, u.gbuf32)
			return
		}
		src = u.gbuf16
	}
	u.compute = z.pool.get32(u.Len(), false)
	compress.DecodeBF16(u.compute, src[:u.Len()])
	if u.gbuf16 != nil {
		z.pool.put16(u.gbuf16)
		u.gbuf16 = nil
	}
	u.bind(true, u.compute)
}

// release frees u's temporary parameters.
func (z *Zero) release(u *unit) {
	if z.cfg.Stage < 3 && !z.cfg.Mixed {
		return
	}
	u.bind(true, nil)
	z.pool.put32(u.gbuf32)
	z.pool.put32(u.compute)
	u.gbuf32, u.compute = nil, nil
}

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
			panic(abort{err})
		}
	}
}

// reduceScatter32 reduces buf (a padded unit) into recv, this rank's
// chunk of it (buf's own block, or the chunk's gradients), then across
// the replica group.
func (z *Zero) reduceScatter32(buf, recv []float32, u *unit) waiter {
	return reduceScatter(z, buf, recv, u, prims.Sum[float32]())
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

// update runs each chunk's optimizer on the mean gradient and brings the
// parameters of stages 0-2 up to date on every rank.
func (z *Zero) update(ctx context.Context) error {
	defer trace.Region(ctx, "optimizer").End()
	scale := 1 / float32(z.world)
	var g32 []float32
	for _, u := range z.units {
		if u.opt == nil {
			continue
		}
		m := u.chunkLen()
		w := z.chunk(u)
		var g []float32
		switch {
		case !z.cfg.Mixed && z.cfg.Stage < 2:
			g = u.g[z.r*u.s : z.r*u.s+m]
		case !z.cfg.Mixed:
			g = u.g[:m]
		}
		if z.cfg.Mixed {
			g32 = grow(g32, m)
			gb := u.gb[:m]
			if z.cfg.Stage < 2 {
				gb = u.gb[z.r*u.s : z.r*u.s+m]
			}
			for i, h := range gb {
				g32[i] = compress.FromBF16(h) * scale
			}
			g = g32
		} else if z.world > 1 {
			for i := range g {
				g[i] *= scale
			}
		}
		u.opt.Step(w, g)
		if z.cfg.Mixed {
			if z.cfg.Stage < 3 {
				compress.EncodeBF16(u.wb[z.r*u.s:z.r*u.s+m], w)
			} else {
				compress.EncodeBF16(u.wb[:m], w)
			}
		}
	}
	z.gatherUnits(ctx)
	return nil
}

// gatherUnits brings the whole units of stages 1 and 2 up to date on
// every rank of the shard group, each from its chunk's owner. The gathers
// run in the background: each unit's is waited for when the unit next
// runs (materialize), so that they overlap the next step's forward pass,
// or by settle.
func (z *Zero) gatherUnits(ctx context.Context) {
	if z.cfg.Stage == 3 || z.n == 1 {
		return
	}
	for _, u := range z.units {
		lo, hi := z.r*u.s, (z.r+1)*u.s
		if z.cfg.Mixed {
			u.updated = prims.IAllGather(ctx, z.shard, u.wb[lo:hi], u.wb)
		} else {
			u.updated = prims.IAllGather(ctx, z.shard, u.w[lo:hi], u.w)
		}
	}
}

// awaitUpdate waits for u's gather after the last update, if any.
func (z *Zero) awaitUpdate(ctx context.Context, u *unit) error {
	if u.updated == nil {
		return nil
	}
	err := u.updated.Wait(ctx)
	u.updated = nil
	if err != nil {
		return fmt.Errorf("zero: gathering the updated unit %s: %w", u.Name, err)
	}
	return nil
}

// settle waits for every unit's gather after the last update: then every
// rank holds the same whole parameters (stages 0-2).
func (z *Zero) settle(ctx context.Context) error {
	var err error
	for _, u := range z.units {
		if e := z.awaitUpdate(ctx, u); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// MeanLoss is the mean of every rank's loss, for reporting.
func (z *Zero) MeanLoss(ctx context.Context, loss float32) (float32, error) {
	if z.comm.Size() == 1 {
		return loss, nil
	}
	v := []float64{float64(loss)}
	if err := prims.AllReduce(ctx, z.comm, v, prims.Sum[float64]()); err != nil {
		return 0, fmt.Errorf("zero: mean loss: %w", err)
	}
	return float32(v[0] / float64(z.comm.Size())), nil
}

// Close lets go of the driver's communicators. Every rank calls it.
func (z *Zero) Close() error {
	err := z.settle(context.Background())
	if z.chain != nil {
		z.chain.close()
		z.chain = nil
	}
	z.st.OnUnit(nil)
	if z.rep != nil && z.rep != z.comm {
		err = errors.Join(err, z.rep.Free())
	}
	if z.shard != nil && z.shard != z.comm {
		err = errors.Join(err, z.shard.Free())
	}
	if z.comm != nil {
		err = errors.Join(err, z.comm.Free())
	}
	z.rep, z.shard, z.comm = nil, nil, nil
	return err
}

// Params returns the model's whole fp32 parameters (the master copy in
// mixed precision), in the flat layout, on every rank: for evaluation,
// tests and single-file checkpoints. Every rank of the driver calls it.
func (z *Zero) Params(ctx context.Context) ([]float32, error) {
	if err := z.settle(ctx); err != nil {
		return nil, err
	}
	total := 0
	for _, u := range z.units {
		total = max(total, u.Hi)
	}
	out := make([]float32, total)
	for _, u := range z.units {
		chunk := make([]float32, u.s)
		copy(chunk, z.chunk(u))
		all := make([]float32, z.n*u.s)
		if err := prims.AllGather(ctx, z.shard, chunk, all); err != nil {
			return nil, fmt.Errorf("zero: gathering unit %s: %w", u.Name, err)
		}
		copy(out[u.Lo:u.Hi], all)
	}
	return out, nil
}

// chunk is this rank's fp32 parameters of u's chunk: the master copy, or
// the parameters themselves.
func (z *Zero) chunk(u *unit) []float32 {
	m := u.chunkLen()
	switch {
	case z.cfg.Mixed:
		return u.master
	case z.cfg.Stage < 3:
		return u.w[z.r*u.s : z.r*u.s+m]
	default:
		return u.w[:m]
	}
}
