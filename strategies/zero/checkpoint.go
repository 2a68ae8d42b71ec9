package zero

import (
	"context"
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

// A checkpoint is a directory of shardckpt files: one shard per rank of a
// shard group, holding the fp32 parameters of the rank's chunks (the
// master copy in mixed precision) under the parameters' names, and its
// optimizer state as "optim.<state>.<parameter>", both as element ranges
// of the whole tensors; and the index, whose metadata holds the step, the
// optimizers' step counts ("optim.<state>") and the caller's strings. As
// the ranges are of the tensors, not of a layout, a checkpoint loads at
// any world size, stage and precision. With a codec that keeps state
// (Config.Compress), a save also carries every rank's codec state, which
// loads only at the same number of ranks (see codecstate.go).

// Save writes a checkpoint of the driver's state after step steps to dir,
// on every rank of the driver: the ranks of one replica group write their
// shards, then rank 0 commits the index. A crash at any moment leaves
// dir's previous checkpoint whole (see shardckpt). Every rank gets the
// same error. The directory must be one that every rank can reach (a
// shared file system across hosts).
func (z *Zero) Save(ctx context.Context, dir string, step int, meta map[string]string) error {
	if err := z.settle(ctx); err != nil {
		return err
	}
	// One tag per save, agreed on, so that a save never writes over the
	// files of the checkpoint it replaces.
	nonce := []int64{rand.Int64N(1 << 40)}
	if err := prims.Broadcast(ctx, z.comm, nonce, 0); err != nil {
		return fmt.Errorf("zero: save: %w", err)
	}
	tag := fmt.Sprintf("step%d-%010x", step, nonce[0])
	codecMD := map[string]string{}
	err := z.saveCodec(ctx, dir, tag, codecMD)
	if z.writer() && err == nil {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			_, err = shardckpt.WriteShard(dir, tag, z.r, z.n, z.pieces())
		}
	}
	if f := z.crash; f != nil {
		z.crash = nil
		f()
	}
	if err = prims.Agree(ctx, z.comm, err, "writing the shards"); err != nil {
		return fmt.Errorf("zero: save to %s: %w", dir, err)
	}
	if z.comm.Rank() == 0 {
		md := maps.Clone(meta)
		if md == nil {
			md = map[string]string{}
		}
		md["step"] = strconv.Itoa(step)
		md["zero.config"] = z.cfg.String()
		for k, v := range z.counters() {
			md[k] = strconv.FormatInt(v, 10)
		}
		maps.Copy(md, codecMD)
		if err = shardckpt.Commit(dir, tag, z.n, md); err == nil {
			if err = cleanCodec(dir, codecMD[metaCodecFile]); err != nil {
				err = fmt.Errorf("committed %q to %s, but removing the older codec states failed (the next save retries): %w", tag, dir, err)
			}
		}
	}
	if err = prims.Agree(ctx, z.comm, err, "committing the index"); err != nil {
		return fmt.Errorf("zero: save to %s: %w", dir, err)
	}
	return nil
}

// writer says whether this rank writes a shard: the ranks of the first
// replica group do.
func (z *Zero) writer() bool { return z.rep == nil || z.rep.Rank() == 0 }

// pieces lists this rank's parameters and optimizer state as pieces of
// the model's tensors.
func (z *Zero) pieces() []shardckpt.Piece {
	var out []shardckpt.Piece
	z.eachPart(func(u *unit, p *nn.Param, lo, hi, at int) {
		w := z.chunk(u)
		out = append(out, shardckpt.Piece{Tensor: p.Name, Shape: p.Shape, Lo: lo, Hi: hi, Data: w[at : at+hi-lo]})
		for _, s := range u.opt.State() {
			if s.F32 != nil {
				out = append(out, shardckpt.Piece{Tensor: "optim." + s.Name + "." + p.Name, Shape: p.Shape, Lo: lo, Hi: hi, Data: s.F32[at : at+hi-lo]})
			}
		}
	})
	return out
}

// eachPart calls f for each part of a parameter in this rank's chunks:
// elements [lo, hi) of p, which are elements at... of the chunk.
func (z *Zero) eachPart(f func(u *unit, p *nn.Param, lo, hi, at int)) {
	for _, u := range z.units {
		if u.opt == nil {
			continue
		}
		clo, chi := u.Lo+u.cl, u.Lo+u.ch
		for _, p := range u.Params {
			a, b := max(p.Offset, clo), min(p.End(), chi)
			if a < b {
				f(u, p, a-p.Offset, b-p.Offset, a-clo)
			}
		}
	}
}

// counters are the optimizers' integer state (their step counts), which
// are the same on every rank and in every unit.
func (z *Zero) counters() map[string]int64 {
	out := map[string]int64{}
	for _, u := range z.units {
		if u.opt == nil {
			continue
		}
		for _, s := range u.opt.State() {
			if len(s.I64) == 1 {
				out["optim."+s.Name] = s.I64[0]
			}
		}
	}
	return out
}

// Load reads dir's checkpoint into the driver, on every rank: each rank
// reads the ranges of its own chunks, whatever world size, stage and
// precision saved them. It returns the step the checkpoint was saved
// after. A missing or corrupt shard is an error naming its file; every
// rank gets an error.
func (z *Zero) Load(ctx context.Context, dir string) (step int, err error) {
	if err := z.settle(ctx); err != nil {
		return 0, err
	}
	step, err = z.load(dir)
	if err = prims.Agree(ctx, z.comm, err, "loading the checkpoint"); err != nil {
		return 0, fmt.Errorf("zero: load %s: %w", dir, err)
	}
	if err := z.publish(ctx); err != nil {
		return 0, err
	}
	return step, nil
}

func (z *Zero) load(dir string) (int, error) {
	ix, err := shardckpt.Open(dir)
	if err != nil {
		return 0, err
	}
	meta := ix.Meta()
	step, err := strconv.Atoi(meta["step"])
	if err != nil {
		return 0, fmt.Errorf("%s: the index's step %q is not a number", shardckpt.IndexFile, meta["step"])
	}
	if err := z.read(ix, "", meta); err != nil {
		return 0, err
	}
	if err := z.loadCodec(dir, meta); err != nil {
		return 0, err
	}
	return step, nil
}

// read reads this rank's chunks and optimizer state from ix, under the
// names pieces gives them after prefix, and the optimizers' step counts
// from meta.
func (z *Zero) read(ix *shardckpt.Index, prefix string, meta map[string]string) error {
	var errs []error
	z.eachPart(func(u *unit, p *nn.Param, lo, hi, at int) {
		if len(errs) > 0 {
			return
		}
		pc := shardckpt.Piece{Tensor: prefix + p.Name, Shape: p.Shape, Lo: lo, Hi: hi, Data: z.chunk(u)[at : at+hi-lo]}
		if err := ix.Read(&pc); err != nil {
			errs = append(errs, err)
			return
		}
		for _, s := range u.opt.State() {
			if s.F32 == nil {
				continue
			}
			pc := shardckpt.Piece{Tensor: prefix + "optim." + s.Name + "." + p.Name, Shape: p.Shape, Lo: lo, Hi: hi, Data: s.F32[at : at+hi-lo]}
			if _, ok := ix.Shape(pc.Tensor); !ok {
				errs = append(errs, fmt.Errorf("the checkpoint has no optimizer state %q for %s: it was saved with another optimizer", s.Name, p.Name))
				return
			}
			if err := ix.Read(&pc); err != nil {
				errs = append(errs, err)
				return
			}
		}
	})
	if len(errs) > 0 {
		return errs[0]
	}
	for _, u := range z.units {
		if u.opt == nil {
			continue
		}
		for _, s := range u.opt.State() {
			if s.I64 == nil {
				continue
			}
			v, err := strconv.ParseInt(meta["optim."+s.Name], 10, 64)
			if err != nil || len(s.I64) != 1 {
				return fmt.Errorf("the checkpoint's index has no count %q: it was saved with another optimizer", "optim."+s.Name)
			}
			s.I64[0] = v
		}
	}
	return nil
}

// Pieces returns what Save writes of this rank, for a caller that puts
// several drivers' shards in one checkpoint of its own (strategies/hybrid
// keeps one driver per tensor-parallel rank): its parameters and
// optimizer state as pieces of the tensors, their names after prefix (nil
// on a rank that writes no shard), and the optimizers' step counts as
// Save records them in the index. The pieces share the driver's memory:
// write them before the next step. It holds no codec state: a caller
// whose codec keeps state (compress.Stateful) must not rely on it.
func (z *Zero) Pieces(ctx context.Context, prefix string) ([]shardckpt.Piece, map[string]string, error) {
	if err := z.settle(ctx); err != nil {
		return nil, nil, err
	}
	counts := map[string]string{}
	for k, v := range z.counters() {
		counts[k] = strconv.FormatInt(v, 10)
	}
	if !z.writer() {
		return nil, counts, nil
	}
	ps := z.pieces()
	for i := range ps {
		ps[i].Tensor = prefix + ps[i].Tensor
	}
	return ps, counts, nil
}

// LoadFrom reads what Pieces gave, saved under prefix in ix, with the
// step counts in meta, on every rank of the driver, as Load does, and
// brings every rank's parameters in line. Every rank gets an error if
// one fails.
func (z *Zero) LoadFrom(ctx context.Context, ix *shardckpt.Index, prefix string, meta map[string]string) error {
	if err := z.settle(ctx); err != nil {
		return err
	}
	err := z.read(ix, prefix, meta)
	if err = prims.Agree(ctx, z.comm, err, "loading the checkpoint"); err != nil {
		return fmt.Errorf("zero: load: %w", err)
	}
	return z.publish(ctx)
}

// publish brings every rank's copy of the parameters in line with the
// chunks: the bf16 parameters from the master copy, and at stages 0-2
// the whole units from their owners.
func (z *Zero) publish(ctx context.Context) error {
	for _, u := range z.units {
		m := u.chunkLen()
		if z.cfg.Mixed && m > 0 {
			if z.cfg.Stage < 3 {
				compress.EncodeBF16(u.wb[z.r*u.s:z.r*u.s+m], u.master)
			} else {
				compress.EncodeBF16(u.wb[:m], u.master)
			}
		}
	}
	z.gatherUnits(ctx)
	return z.settle(ctx)
}

// LoadModel reads the whole parameters of a checkpoint that Save wrote
// into a model's Store, in one process and without a driver: to evaluate
// or fine-tune a model that was trained sharded. It returns the index's
// metadata.
func LoadModel(dir string, st *nn.Store) (map[string]string, error) {
	ix, err := shardckpt.Open(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range st.Params {
		pc := shardckpt.Piece{Tensor: p.Name, Shape: p.Shape, Lo: 0, Hi: p.Len(), Data: p.W}
		if err := ix.Read(&pc); err != nil {
			return nil, err
		}
	}
	return ix.Meta(), nil
}

// CrashAfterShard makes the next Save call f on this rank after writing
// its shard and before the index is committed: for tests of crash safety
// (examples/zero's --crash-in-save).
func (z *Zero) CrashAfterShard(f func()) { z.crash = f }
