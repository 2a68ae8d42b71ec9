package hybrid

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// A checkpoint is a directory of shardckpt files, one shard per rank of
// the mesh, each holding what the rank owns:
//
//   - "tp<t>-of-<TP>/<parameter>": its tensor-parallel shard of each
//     parameter of its chunks (under the shard's own shape; replicated
//     parameters under every tensor-parallel rank's prefix), from the
//     first data-parallel replica, or at ZeRO stages 2 and 3 from each
//     replica its part;
//   - "tp<t>-of-<TP>/optim.<state>.<parameter>": the optimizer state of
//     what it updates (at ZeRO stage 1 or more, its part only);
//   - "rng/rank-<r>": its random streams (tp.RNG.MarshalBinary, a byte an
//     element);
//   - "codec/<path>/rank-<r>": with a codec that keeps state (error
//     feedback: topk, randk, sign, qsgd, powersgd), the state of the one
//     its gradients' path runs ("ddp", "pipeline" or "zero"), as
//     MarshalBinary gives it, three bytes an element (codecBytes). A
//     rank's state is its own, so it goes in its own shard, which
//     shardckpt's sha256 covers.
//
// The index's metadata holds the step, the optimizers' step counts
// ("optim.<state>"), the mesh and model (MetaLayout, MetaModel), the
// codec whose state it carries (MetaCodec, only then) and the caller's
// strings. A checkpoint that carries a codec's state loads only into an
// engine of a codec of the same compress.StateName; one without codec
// state loads into an engine with a stateful codec, whose state is then
// left as it is (an engine fresh from New: the residuals at zero). A checkpoint loads only on the same mesh and model:
// re-cutting tensor-parallel shards or pipeline chunks is a conversion
// of its own (Megatron has a tool for it), which this package does not do.

// MetaLayout and MetaModel are the index's keys of the mesh and the model
// a checkpoint was saved on, as Layout and ModelString write them.
const (
	MetaLayout = "hybrid.layout"
	MetaModel  = "hybrid.model"
)

// MetaCodec is the index's key of the codec whose state a checkpoint
// carries (compress.StateName): there only when it carries one.
const MetaCodec = "hybrid.codec"

// Layout describes the mesh's state layout: "tp 2 pp 1 dp 1 zero 0
// virtual 1". Two engines of one Layout and model hold the same state on
// each rank.
func (c Config) Layout() string {
	return fmt.Sprintf("tp %d pp %d dp %d zero %d virtual %d", c.TP, c.PP, c.DP, c.Zero, max(c.Virtual, 1))
}

// ModelString describes the model's shape: "layers 2 heads 4 dim 128
// context 64 vocab 96".
func ModelString(m nn.GPTConfig) string {
	return fmt.Sprintf("layers %d heads %d dim %d context %d vocab %d", m.Layers, m.Heads, m.Dim, m.Context, m.Vocab)
}

// Save writes a checkpoint of the engine after step steps to dir, on
// every rank: each writes its shard, then rank 0 of the mesh commits the
// index with meta. A crash at any moment leaves dir's previous
// checkpoint whole (shardckpt). Every rank gets the same error. dir must
// be one every rank reaches.
func (e *Engine) Save(ctx context.Context, dir string, step int, meta map[string]string) error {
	world := e.mesh.World
	// One tag per save, agreed on, so that a save never writes over the
	// files of the checkpoint it replaces.
	nonce := []int64{rand.Int64N(1 << 40)}
	if err := prims.Broadcast(ctx, world, nonce, 0); err != nil {
		return fmt.Errorf("hybrid: save: %w", err)
	}
	tag := fmt.Sprintf("step%d-%010x", step, nonce[0])
	pieces, counts, err := e.pieces(ctx)
	if err == nil {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			_, err = shardckpt.WriteShard(dir, tag, world.Rank(), world.Size(), pieces)
		}
	}
	if err = prims.Agree(ctx, world, err, "writing the shards"); err != nil {
		return fmt.Errorf("hybrid: save to %s: %w", dir, err)
	}
	if world.Rank() == 0 {
		md := maps.Clone(meta)
		if md == nil {
			md = map[string]string{}
		}
		maps.Copy(md, counts)
		md["step"] = strconv.Itoa(step)
		md[MetaLayout] = e.cfg.Layout()
		md[MetaModel] = ModelString(e.cfg.Model)
		delete(md, MetaCodec)
		if len(e.codecs()) > 0 {
			md[MetaCodec] = compress.StateName(e.cfg.Compress)
		}
		err = shardckpt.Commit(dir, tag, world.Size(), md)
	}
	if err = prims.Agree(ctx, world, err, "committing the index"); err != nil {
		return fmt.Errorf("hybrid: save to %s: %w", dir, err)
	}
	return nil
}

// Load reads dir's checkpoint into the engine, on every rank, and returns
// the step it was saved after. It must have been saved on the same mesh
// and model (MetaLayout, MetaModel): another is an error wrapping
// nn.ErrCheckpoint. A missing or corrupt file is an error naming it.
// Every rank gets an error if one fails. A checkpoint that carries the
// state of another codec than the engine's, or that carries one the
// engine has none for, is an error wrapping nn.ErrCheckpoint that names
// the --compress to pass.
func (e *Engine) Load(ctx context.Context, dir string) (step int, err error) {
	var ix *shardckpt.Index
	var meta map[string]string
	ix, err = shardckpt.Open(dir)
	if err == nil {
		meta = ix.Meta()
		step, err = e.checkMeta(meta)
	}
	if err == nil && e.zero == nil {
		err = e.read(ix, meta)
	}
	if err == nil {
		err = e.readRNG(ix)
	}
	if err == nil {
		err = e.readCodecs(ix, meta)
	}
	if err = prims.Agree(ctx, e.mesh.World, err, "loading the checkpoint"); err != nil {
		return 0, fmt.Errorf("hybrid: load %s: %w", dir, err)
	}
	if e.zero != nil {
		if err := e.zero.LoadFrom(ctx, ix, e.prefix(), meta); err != nil {
			return 0, fmt.Errorf("hybrid: load %s: %w", dir, err)
		}
	}
	return step, nil
}

// checkMeta compares the mesh and model the index records with the
// engine's, and returns its step.
func (e *Engine) checkMeta(meta map[string]string) (int, error) {
	if l := meta[MetaLayout]; l != e.cfg.Layout() {
		return 0, fmt.Errorf("%w: %s: it was saved on the mesh %q, this engine is %q (resharding a checkpoint is not supported)", nn.ErrCheckpoint, shardckpt.IndexFile, l, e.cfg.Layout())
	}
	if m := meta[MetaModel]; m != ModelString(e.cfg.Model) {
		return 0, fmt.Errorf("%w: %s: it holds the model %q, this engine builds %q", nn.ErrCheckpoint, shardckpt.IndexFile, m, ModelString(e.cfg.Model))
	}
	step, err := strconv.Atoi(meta["step"])
	if err != nil {
		return 0, fmt.Errorf("%s: the index's step %q is not a number", shardckpt.IndexFile, meta["step"])
	}
	return step, nil
}

// prefix is the names' prefix of this rank's tensor-parallel shards.
func (e *Engine) prefix() string {
	return fmt.Sprintf("tp%d-of-%d/", e.mesh.T+1, e.mesh.TP)
}

// rngTensor is the name of this rank's random streams.
func (e *Engine) rngTensor() string {
	return fmt.Sprintf("rng/rank-%05d", e.mesh.World.Rank())
}

// pieces lists what this rank writes, and the optimizers' step counts.
func (e *Engine) pieces(ctx context.Context) ([]shardckpt.Piece, map[string]string, error) {
	rng, err := e.rng.MarshalBinary()
	if err != nil {
		return nil, nil, fmt.Errorf("hybrid: the random streams: %w", err)
	}
	b := make([]float32, len(rng))
	for i, v := range rng {
		b[i] = float32(v)
	}
	out := []shardckpt.Piece{{Tensor: e.rngTensor(), Shape: []int{len(b)}, Lo: 0, Hi: len(b), Data: b}}
	if e.zero != nil {
		// Pieces settles the driver first: its codec is idle after it.
		ps, counts, err := e.zero.Pieces(ctx, e.prefix())
		if err == nil {
			var cs []shardckpt.Piece
			cs, err = e.codecPieces()
			ps = append(ps, cs...)
		}
		return append(out, ps...), counts, err
	}
	cs, err := e.codecPieces()
	if err != nil {
		return nil, nil, err
	}
	out = append(out, cs...)
	counts := map[string]string{}
	e.eachOpt(func(p *Part, opt nn.Optimizer) {
		lo, hi := opt.Range()
		st := p.Store()
		if e.mesh.D == 0 {
			for _, q := range st.Params {
				out = append(out, shardckpt.Piece{Tensor: e.prefix() + q.Name, Shape: q.Shape, Lo: 0, Hi: q.Len(), Data: st.W[q.Offset:q.End()]})
			}
		}
		for _, s := range opt.State() {
			if len(s.I64) == 1 {
				counts["optim."+s.Name] = strconv.FormatInt(s.I64[0], 10)
			}
		}
		if e.cfg.Zero == 0 && e.mesh.D != 0 {
			return // the replicas hold the same state as the first
		}
		eachRange(st.Params, lo, hi, func(q *nn.Param, a, b, at int) {
			for _, s := range opt.State() {
				if s.F32 != nil {
					out = append(out, shardckpt.Piece{Tensor: e.prefix() + "optim." + s.Name + "." + q.Name, Shape: q.Shape, Lo: a, Hi: b, Data: s.F32[at : at+b-a]})
				}
			}
		})
	})
	return out, counts, nil
}

// read reads this rank's parameters and optimizer state (without the
// ZeRO driver, which reads its own). Its error lists each distinct
// problem once: a shard file that is missing or damaged fails the read
// of every tensor in it, with the same message.
func (e *Engine) read(ix *shardckpt.Index, meta map[string]string) error {
	var errs []error
	seen := map[string]bool{}
	add := func(err error) {
		if err != nil && !seen[err.Error()] {
			seen[err.Error()] = true
			errs = append(errs, err)
		}
	}
	e.eachOpt(func(p *Part, opt nn.Optimizer) {
		st := p.Store()
		for _, q := range st.Params {
			pc := shardckpt.Piece{Tensor: e.prefix() + q.Name, Shape: q.Shape, Lo: 0, Hi: q.Len(), Data: st.W[q.Offset:q.End()]}
			add(ix.Read(&pc))
		}
		lo, hi := opt.Range()
		eachRange(st.Params, lo, hi, func(q *nn.Param, a, b, at int) {
			for _, s := range opt.State() {
				if s.F32 != nil {
					pc := shardckpt.Piece{Tensor: e.prefix() + "optim." + s.Name + "." + q.Name, Shape: q.Shape, Lo: a, Hi: b, Data: s.F32[at : at+b-a]}
					add(ix.Read(&pc))
				}
			}
		})
		for _, s := range opt.State() {
			if s.I64 == nil {
				continue
			}
			v, err := strconv.ParseInt(meta["optim."+s.Name], 10, 64)
			if err != nil || len(s.I64) != 1 {
				add(fmt.Errorf("the checkpoint's index has no count %q: it was saved with another optimizer", "optim."+s.Name))
				continue
			}
			s.I64[0] = v
		}
	})
	return errors.Join(errs...)
}

// readRNG restores this rank's random streams.
func (e *Engine) readRNG(ix *shardckpt.Index) error {
	shape, ok := ix.Shape(e.rngTensor())
	if !ok || len(shape) != 1 {
		return fmt.Errorf("%w: %s has no random streams %q", nn.ErrCheckpoint, shardckpt.IndexFile, e.rngTensor())
	}
	pc := shardckpt.Piece{Tensor: e.rngTensor(), Shape: shape, Lo: 0, Hi: shape[0], Data: make([]float32, shape[0])}
	if err := ix.Read(&pc); err != nil {
		return err
	}
	b := make([]byte, len(pc.Data))
	for i, v := range pc.Data {
		if v < 0 || v > 255 || v != float32(int(v)) {
			return fmt.Errorf("%w: %s: random streams %q hold %g, not a byte", nn.ErrCheckpoint, shardckpt.IndexFile, e.rngTensor(), v)
		}
		b[i] = byte(v)
	}
	if err := e.rng.UnmarshalBinary(b); err != nil {
		return fmt.Errorf("%w: %s: random streams %q: %w", nn.ErrCheckpoint, shardckpt.IndexFile, e.rngTensor(), err)
	}
	return nil
}

// eachOpt calls f for each of this rank's parts and its optimizer,
// without the ZeRO driver.
func (e *Engine) eachOpt(f func(p *Part, opt nn.Optimizer)) {
	if e.ddp != nil {
		f(e.parts[0], e.opt)
		return
	}
	if e.sync != nil {
		for i, p := range e.sync.parts {
			f(p, e.sync.opts[i])
		}
	}
}

// eachRange calls f for each parameter's part in the flat range [lo, hi):
// its elements [a, b), which are elements at... of the range.
func eachRange(params []*nn.Param, lo, hi int, f func(q *nn.Param, a, b, at int)) {
	for _, q := range params {
		x, y := max(q.Offset, lo), min(q.End(), hi)
		if x < y {
			f(q, x-q.Offset, y-q.Offset, x-lo)
		}
	}
}
