package compress

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// NewFP16 returns the "fp16" codec: each rank rounds its gradient to
// IEEE binary16 (ToF16), the ranks all-reduce the halves with a sum that
// rounds every partial sum back to binary16 (AddF16), and the result is
// widened back into the buffer. It halves the bytes on the wire (Sent is
// 2 bytes an element) and keeps about 3 significant digits.
//
// It is stateless: there is no error feedback, what rounding drops is
// lost. Binary16's range is narrow: a gradient, or a partial sum of
// gradients, of magnitude 65520 or more becomes ±Inf, and one below
// 2^-24 becomes zero (PyTorch's fp16_compress_hook has the same limits);
// scale the loss, or use NewBF16, where gradients may be that large.
// Stats.Saturated counts the elements that became ±Inf.
func NewFP16() Codec {
	return &narrow{name: "fp16", enc: EncodeF16, dec: DecodeF16, add: AddF16, inf: 0x7c00}
}

// NewBF16 returns the "bf16" codec: NewFP16's scheme with bfloat16
// (ToBF16, AddBF16) instead of binary16. It has float32's range, so it
// does not overflow where float32 would not, but keeps only 8 significant
// bits (a relative error of up to 2^-8 per rounding, against binary16's
// 2^-11). It is stateless: no error feedback.
func NewBF16() Codec {
	return &narrow{name: "bf16", enc: EncodeBF16, dec: DecodeBF16, add: AddBF16, inf: 0x7f80}
}

// narrow is a codec that all-reduces a 16-bit float format: fp16 or
// bf16. Its only state is the scratch buffer it reuses.
type narrow struct {
	name string
	enc  func(dst []uint16, src []float32)
	dec  func(dst []float32, src []uint16)
	add  func(dst, src []uint16)
	inf  uint16   // the format's +Inf
	buf  []uint16 // scratch, the encoded bucket
}

var _ Codec = (*narrow)(nil)

// Name is "fp16" or "bf16".
func (n *narrow) Name() string { return n.name }

// AllReduce replaces buf with the sum over c's ranks of their buffers,
// each rounded to the 16-bit format, the sum rounded at every step. It
// leaves buf as it was if the all-reduce fails.
func (n *narrow) AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, _ []Segment) (Stats, error) {
	if cap(n.buf) < len(buf) {
		n.buf = make([]uint16, len(buf))
	}
	h := n.buf[:len(buf)]
	n.enc(h, buf)
	if err := prims.AllReduce(ctx, c, h, prims.OpFunc(n.add)); err != nil {
		return Stats{}, fmt.Errorf("%s all-reduce of bucket %d (%d elements): %w", n.name, key, len(buf), err)
	}
	sat := n.saturated(h, buf)
	n.dec(buf, h)
	return Stats{Raw: 4 * int64(len(buf)), Sent: 2 * int64(len(buf)), Saturated: sat}, nil
}

// saturated counts the elements of sum, in the 16-bit format, that are
// ±Inf where in, the rank's float32 input, is finite.
func (n *narrow) saturated(sum []uint16, in []float32) int64 {
	var c int64
	for i, h := range sum[:len(in)] {
		if h&0x7fff == n.inf && in[i]-in[i] == 0 {
			c++
		}
	}
	return c
}

var _ ReduceScatterer = (*narrow)(nil)

// ReduceScatter leaves in recv this rank's block of the sum of every
// rank's buf, each rounded to the 16-bit format and the sum rounded at
// every step, as AllReduce's is. buf is left alone.
func (n *narrow) ReduceScatter(ctx context.Context, c *spmd.Comm, key int, buf, recv []float32, _ []Segment) (Stats, error) {
	lo, hi := prims.Block(len(buf), c.Size(), c.Rank())
	if len(recv) != hi-lo {
		return Stats{}, fmt.Errorf("%s reduce-scatter of bucket %d: recv has %d elements, want %d (block %d of %d elements cut %d ways)",
			n.name, key, len(recv), hi-lo, c.Rank(), len(buf), c.Size())
	}
	if cap(n.buf) < len(buf)+len(recv) {
		n.buf = make([]uint16, len(buf)+len(recv))
	}
	h, rh := n.buf[:len(buf)], n.buf[len(buf):len(buf)+len(recv)]
	n.enc(h, buf)
	if err := prims.ReduceScatter(ctx, c, h, rh, prims.OpFunc(n.add)); err != nil {
		return Stats{}, fmt.Errorf("%s reduce-scatter of bucket %d (%d elements): %w", n.name, key, len(buf), err)
	}
	n.dec(recv, rh)
	return Stats{Raw: 4 * int64(len(buf)), Sent: 2 * int64(len(buf)), Saturated: n.saturated(rh, buf[lo:hi])}, nil
}
