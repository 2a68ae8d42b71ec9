package compress

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Lossless names a lossless stage for the bytes an all-gathering codec
// (top-k, sign, QSGD) puts on the wire: its index-value pairs, packed
// signs and levels often shrink further, where raw floats do not.
type Lossless string

// The lossless stages.
const (
	LosslessOff  Lossless = ""
	LosslessS2   Lossless = "s2"   // klauspost/compress's S2: about a GB/s a core
	LosslessZstd Lossless = "zstd" // zstd at its fastest level: smaller, slower
	// LosslessAuto measures S2 on each bucket's first exchange and keeps
	// it only if the bytes it saves on the communicator's link (topo's
	// model: the far link when the ranks span hosts) take longer than
	// encoding and decoding; every rank must agree, or none uses it.
	LosslessAuto Lossless = "auto"
)

// WithLossless adds a lossless stage to codec, which must be one that
// all-gathers byte payloads (top-k, sign, QSGD); its Name gains
// "+MODE". Parse takes "topk:0.01+s2".
func WithLossless(codec Codec, mode Lossless) (Codec, error) {
	switch mode {
	case LosslessOff, LosslessS2, LosslessZstd, LosslessAuto:
	default:
		return nil, fmt.Errorf("lossless stage %q: want s2, zstd or auto", mode)
	}
	var g *gatherer
	switch c := codec.(type) {
	case *topK:
		g = &c.g
	case *signSGD:
		g = &c.g
	case *qsgd:
		g = &c.g
	default:
		return nil, fmt.Errorf("%s sends its numbers through an all-reduce: a lossless stage applies to the payloads that topk, sign and qsgd all-gather", codec.Name())
	}
	g.mode = mode
	return codec, nil
}

// gatherer all-gathers the codecs' byte payloads, through the lossless
// stage when one is on.
type gatherer struct {
	mode Lossless
	use  map[int]bool // LosslessAuto's decision per key
	// beta, if set, gives the link's seconds per byte instead of topo's
	// model (tests).
	beta func(ctx context.Context, c *spmd.Comm) (float64, error)

	lens     []uint32
	enc, all []byte
	zenc     *zstd.Encoder
	zdec     *zstd.Decoder
	zmax     int
}

// suffix is what the stage adds to the codec's name.
func (g *gatherer) suffix() string {
	if g.mode == LosslessOff {
		return ""
	}
	return "+" + string(g.mode)
}

// gather all-gathers every rank's send (equal lengths) into wire and
// returns the bytes this rank sent.
func (g *gatherer) gather(ctx context.Context, c *spmd.Comm, key int, send, wire []byte) (int, error) {
	mode := g.mode
	if mode == LosslessAuto {
		use, err := g.decide(ctx, c, key, send)
		if err != nil {
			return 0, err
		}
		mode = LosslessOff
		if use {
			mode = LosslessS2
		}
	}
	if mode == LosslessOff {
		return len(send), prims.AllGather(ctx, c, send, wire)
	}
	enc, err := g.encode(mode, send)
	if err != nil {
		return 0, err
	}
	p, sz := c.Size(), len(send)
	g.lens = slices.Grow(g.lens[:0], p)[:p]
	if err := prims.AllGather(ctx, c, []uint32{uint32(len(enc))}, g.lens); err != nil {
		return 0, err
	}
	m := int(slices.Max(g.lens))
	all := reuse(&g.all, p*m)
	me := all[c.Rank()*m : (c.Rank()+1)*m]
	clear(me[copy(me, enc):])
	if err := prims.AllGather(ctx, c, me, all); err != nil {
		return 0, err
	}
	for r := range p {
		if err := g.decode(mode, wire[r*sz:(r+1)*sz], all[r*m:r*m+int(g.lens[r])]); err != nil {
			return 0, fmt.Errorf("rank %d's %s payload: %w", r, mode, err)
		}
	}
	return len(enc) + 4, nil
}

func (g *gatherer) encode(mode Lossless, src []byte) ([]byte, error) {
	if mode == LosslessS2 {
		g.enc = s2.Encode(g.enc[:cap(g.enc)], src)
		return g.enc, nil
	}
	if g.zenc == nil {
		var err error
		if g.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(zstdWindow)); err != nil {
			return nil, err
		}
	}
	g.enc = g.zenc.EncodeAll(src, g.enc[:0])
	return g.enc, nil
}

// zstdWindow is the zstd stage's window: the encoder's, and the most a
// decoder accepts, which also bounds what a hostile frame can make it
// allocate beyond dst.
const zstdWindow = 1 << 20

// decode decompresses an untrusted payload into dst, which it must fill
// exactly: anything else is corrupt, and no payload makes it allocate
// more than dst's length and a window.
func (g *gatherer) decode(mode Lossless, dst, src []byte) error {
	if mode == LosslessS2 {
		n, err := s2.DecodedLen(src)
		if err != nil || n != len(dst) {
			return fmt.Errorf("%w: an s2 block of %d bytes decoding to %d, want %d (%v)", ErrCorrupt, len(src), n, len(dst), err)
		}
		if _, err := s2.Decode(dst, src); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil
	}
	if g.zdec == nil || g.zmax < len(dst) {
		if g.zdec != nil {
			g.zdec.Close()
		}
		var err error
		if g.zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdWindow), zstd.WithDecoderMaxMemory(uint64(len(dst))+zstdWindow)); err != nil {
			return err
		}
		g.zmax = len(dst)
	}
	out, err := g.zdec.DecodeAll(src, dst[:0])
	if err != nil || len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return fmt.Errorf("%w: a zstd frame of %d bytes decoding to %d, want %d (%v)", ErrCorrupt, len(src), len(out), len(dst), err)
	}
	return nil
}

// topoBeta is the seconds per byte of c's slowest link in topo's model:
// the far link when c's ranks span hosts.
func topoBeta(ctx context.Context, c *spmd.Comm) (float64, error) {
	m, err := topo.ModelFor(ctx, c)
	if err != nil {
		return 0, err
	}
	if len(topo.LayoutOf(c).Hosts) > 1 {
		return m.Remote.Beta, nil
	}
	return m.Local.Beta, nil
}

// decide is LosslessAuto's choice for key, made at its first exchange:
// S2 if the time its saved bytes take on the link exceeds encoding this
// rank's payload and decoding every other's, on every rank.
func (g *gatherer) decide(ctx context.Context, c *spmd.Comm, key int, send []byte) (bool, error) {
	if use, ok := g.use[key]; ok {
		return use, nil
	}
	linkBeta := g.beta
	if linkBeta == nil {
		linkBeta = topoBeta
	}
	beta, err := linkBeta(ctx, c)
	if err != nil {
		return false, err
	}
	t0 := time.Now()
	enc, err := g.encode(LosslessS2, send)
	if err != nil {
		return false, err
	}
	te := time.Since(t0).Seconds()
	t0 = time.Now()
	if err := g.decode(LosslessS2, make([]byte, len(send)), enc); err != nil {
		return false, err
	}
	td := time.Since(t0).Seconds()
	others := float64(c.Size() - 1)
	saved := float64(len(send)-len(enc)) * others * beta
	vote := []uint32{0}
	if saved > te+others*td {
		vote[0] = 1
	}
	if err := prims.AllReduce(ctx, c, vote, prims.Min[uint32]()); err != nil {
		return false, err
	}
	if g.use == nil {
		g.use = map[int]bool{}
	}
	g.use[key] = vote[0] == 1
	return g.use[key], nil
}
