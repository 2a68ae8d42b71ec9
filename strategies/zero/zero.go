package zero

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/internal/replica"
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
	chain    *chain // hybrid stage 1-3: all-reduces after the reduce-scatters; a codec's collectives
	codecMu  sync.Mutex
	codec    compress.Stats // what Config.Compress has moved (guarded by codecMu)
	crash    func()         // see CrashAfterShard
	calls    [4]int         // unit hook calls by phase in this pass, to check the model's
}

// unit is one nn.Unit and what this rank keeps of it.
type unit struct {
	nn.Unit
	index  int
	s      int                // chunk length: Len padded to a multiple of n, over n
	cl, ch int                // this rank's chunk, relative to the unit: [cl, ch), may be empty
	segs   []compress.Segment // Config.Compress: the unit's parameters as matrices
	csegs  []compress.Segment // and its chunk's

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
	// Close what is built on any error below, with the driver as it is
	// now: a return of nil, err clears z before deferred calls run.
	defer func(z *Zero) {
		if err != nil {
			z.Close()
		}
	}(z)
	if err := replica.Same(ctx, c, st, "zero"); err != nil {
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
	switch {
	case z.rep != nil && z.n > 1:
		z.chain = newChain(z.rep)
	case z.CodecActive():
		// A communicator of the codec's own: its collectives run on the
		// chain's goroutine, beside the gathers on the shard group and the
		// losses and barriers on z.comm.
		g := z.shard
		if z.rep != nil {
			g = z.rep
		}
		cc, err := g.Dup(ctx)
		if err != nil {
			return nil, fmt.Errorf("zero: the compressed reductions' communicator: %w", err)
		}
		z.chain = newChain(cc)
		z.chain.free = true
	}
	return z, nil
}

// broadcastPiece is the most elements New broadcasts in one call (4 MiB).
const broadcastPiece = 1 << 20

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
	if z.cfg.Compress != nil {
		u.segs = dp.Segments(nu.Params, nu.Lo, nu.Hi)
		u.csegs = dp.Segments(nu.Params, nu.Lo+u.cl, nu.Lo+u.ch)
	}
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
		err = errors.Join(err, z.chain.close())
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
