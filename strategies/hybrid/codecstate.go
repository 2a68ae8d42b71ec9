package hybrid

import (
	"encoding"
	"fmt"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// rankCodec is a codec a rank holds, and the gradients' path that runs
// it.
type rankCodec struct {
	path  string // "ddp", "pipeline" or "zero"
	codec compress.Codec
}

// codecs lists the codecs with state (compress.Stateful) this rank holds:
// the one its gradients' path runs, Config.Compress, whether the DDP
// hook (e.hook), the pipeline's sync (e.sync) or the ZeRO driver
// (e.zero) runs it; none where it has no work (CodecActive), whose state
// stays a fresh codec's.
func (e *Engine) codecs() []rankCodec {
	c := e.cfg.Compress
	if !compress.Stateful(c) || !e.CodecActive() {
		return nil
	}
	switch {
	case e.hook != nil:
		return []rankCodec{{"ddp", c}}
	case e.sync != nil && e.sync.codec != nil:
		return []rankCodec{{"pipeline", e.sync.codec}}
	case e.zero != nil:
		return []rankCodec{{"zero", c}}
	}
	return nil
}

// codecTensor is the name of this rank's state of the codec path runs.
func (e *Engine) codecTensor(path string) string {
	return fmt.Sprintf("codec/%s/rank-%05d", path, e.mesh.World.Rank())
}

// codecPieces gives this rank's codec states, to write in its shard. The
// codecs must be idle (after a step).
func (e *Engine) codecPieces() ([]shardckpt.Piece, error) {
	var out []shardckpt.Piece
	for _, rc := range e.codecs() {
		b, err := rc.codec.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("hybrid: saving the state of %s: %w", rc.codec.Name(), err)
		}
		f := codecFloats(b)
		out = append(out, shardckpt.Piece{Tensor: e.codecTensor(rc.path), Shape: []int{len(f)}, Lo: 0, Hi: len(f), Data: f})
	}
	return out, nil
}

// readCodecs restores this rank's codec states from ix, after checking
// that the checkpoint's codec (meta[MetaCodec]) is the engine's. With one
// data-parallel replica the state is dropped: no codec runs.
func (e *Engine) readCodecs(ix *shardckpt.Index, meta map[string]string) error {
	saved, has := meta[MetaCodec]
	cs := e.codecs()
	now := compress.StateName(e.cfg.Compress)
	switch {
	case !has:
		return nil // the codec's state stays as New made it
	case e.mesh.DP == 1:
		return nil // saved before a lone replica's codec stopped running
	case len(cs) == 0 || saved != now:
		return fmt.Errorf("%w: %s: it carries the error-feedback state of --compress %s, which this engine's codec (%s) cannot take: resume with --compress %s (its lossless stage, +s2 or +zstd, may differ), or start afresh", nn.ErrCheckpoint, shardckpt.IndexFile, saved, now, saved)
	}
	for _, rc := range cs {
		name := e.codecTensor(rc.path)
		shape, ok := ix.Shape(name)
		if !ok || len(shape) != 1 {
			return fmt.Errorf("%w: %s carries the state of %s but has no %q for this rank", nn.ErrCheckpoint, shardckpt.IndexFile, saved, name)
		}
		pc := shardckpt.Piece{Tensor: name, Shape: shape, Lo: 0, Hi: shape[0], Data: make([]float32, shape[0])}
		if err := ix.Read(&pc); err != nil {
			return err
		}
		b, err := codecBytes(pc.Data)
		if err == nil {
			err = rc.codec.(encoding.BinaryUnmarshaler).UnmarshalBinary(b)
		}
		if err != nil {
			return fmt.Errorf("%w: %s: codec state %q: %w", nn.ErrCheckpoint, shardckpt.IndexFile, name, err)
		}
	}
	return nil
}

// codecFloats packs b into float32s that shardckpt stores exactly: three
// bytes an element, as the integer b0 + b1·2⁸ + b2·2¹⁶ (below 2²⁴, so
// exact, and never a NaN whose bits a machine might change), after a
// 0x80 byte and then zeros to a multiple of three, which codecBytes
// strips.
func codecFloats(b []byte) []float32 {
	p := append(append(make([]byte, 0, len(b)+3), b...), 0x80)
	for len(p)%3 != 0 {
		p = append(p, 0)
	}
	out := make([]float32, len(p)/3)
	for i := range out {
		out[i] = float32(int(p[3*i]) | int(p[3*i+1])<<8 | int(p[3*i+2])<<16)
	}
	return out
}

// codecBytes undoes codecFloats.
func codecBytes(f []float32) ([]byte, error) {
	b := make([]byte, 0, 3*len(f))
	for _, v := range f {
		if v < 0 || v >= 1<<24 || v != float32(int(v)) {
			return nil, fmt.Errorf("it holds %g, not three bytes", v)
		}
		n := int(v)
		b = append(b, byte(n), byte(n>>8), byte(n>>16))
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end == 0 || b[end-1] != 0x80 || len(b)-end > 2 {
		return nil, fmt.Errorf("its padding is not a 0x80 byte and up to two zeros")
	}
	return b[:end-1], nil
}
