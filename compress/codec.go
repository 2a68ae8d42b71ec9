package compress

import (
	"context"
	"errors"

	"github.com/gorun-hpc/gorun/spmd"
)

// ErrCorrupt is wrapped by every error of a decoder given a payload that
// no encoder of this package wrote: a wrong length, an index out of
// range, a bad header. Payloads come from other ranks over the network,
// so a decoder never panics and never writes outside its output.
var ErrCorrupt = errors.New("corrupt compressed payload")

// Segment is one tensor inside a bucket: elements [Off, Off+Rows·Cols)
// of the bucket, a Rows x Cols matrix (a vector is one row). Codecs that
// work on matrices (PowerSGD) use the segments; the others see the
// bucket as one vector.
type Segment struct {
	Off, Rows, Cols int
}

// Len is the segment's number of elements.
func (s Segment) Len() int { return s.Rows * s.Cols }

// Stats counts what a codec moved: the bytes the uncompressed float32
// all-reduce's input had (Raw) and the bytes this rank put on the wire
// as its encoded contribution (Sent), so that Raw/Sent is the
// compression ratio.
type Stats struct {
	Raw, Sent int64
	// Saturated counts, for fp16 and bf16, the elements that were finite
	// in this rank's input and came out ±Inf: the format overflowed, on
	// rounding the input or a partial sum (fp16 at 65520; bf16 only near
	// float32's own limit), or another rank's input was infinite. The
	// other codecs leave it 0. A program should say so when it is not 0:
	// the optimizer was given infinities.
	Saturated int64
}

// Add adds o to s.
func (s *Stats) Add(o Stats) { s.Raw += o.Raw; s.Sent += o.Sent; s.Saturated += o.Saturated }

// Ratio is Raw/Sent; 0 if nothing was sent.
func (s Stats) Ratio() float64 {
	if s.Sent == 0 {
		return 0
	}
	return float64(s.Raw) / float64(s.Sent)
}

// Codec is a stateful gradient compressor together with the collective
// it needs. AllReduce replaces buf, this rank's gradient of bucket key,
// with the sum over c's ranks of what each rank's codec sent for its
// gradient (the decoded, compressed contributions); a codec with error
// feedback keeps, per key, what it did not send and adds it to the next
// gradient of that key. Every rank of c calls AllReduce with the same
// key, length and segments in the same order. A Codec is used by one
// goroutine at a time.
//
// A codec that keeps state between calls (error feedback's residuals in
// topk, randk, sign and powersgd, PowerSGD's last Q, the step counts that
// draw random-k's indices and QSGD's rounding) also implements
// encoding.BinaryMarshaler and encoding.BinaryUnmarshaler, so that a
// checkpoint can carry it, as PyTorch users save the PowerSGD hook's
// state and DeepSpeed's 1-bit Adam its error feedback: a run resumed
// with it compresses as the uninterrupted run would have. MarshalBinary
// returns this rank's state (each rank's differs, and each saves its
// own); UnmarshalBinary replaces the state of a codec that Parse made
// from the same name (and, for the same results, seed) with the one
// saved, or fails, changing nothing, with an error wrapping ErrCorrupt or
// ErrState. The keys must name the same buckets as before. fp16 and bf16
// keep no state and implement neither; the lossless stage's choice
// ("+auto") is not saved but made again, which changes the bytes sent,
// not the sum.
type Codec interface {
	// Name is the codec and its parameter as --compress takes it
	// ("fp16", "topk:0.01", "powersgd:4").
	Name() string
	AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, segs []Segment) (Stats, error)
}

// ReduceScatterer is a Codec that can also reduce-scatter in its own
// format: ReduceScatter leaves in recv block c.Rank() of the sum over c's
// ranks of what each sent for buf, as prims.Block cuts len(buf) into
// c.Size() blocks; recv has that block's length and may be buf's own
// block. Only the codecs whose sum is elementwise in their wire format
// have it (fp16, bf16): the others exchange payloads that cannot be cut
// by ranges of elements (top-k's pairs, PowerSGD's factors), so a
// sharded driver all-reduces with them and keeps its block, which at
// their ratios still moves fewer bytes than a dense reduce-scatter.
type ReduceScatterer interface {
	Codec
	ReduceScatter(ctx context.Context, c *spmd.Comm, key int, buf, recv []float32, segs []Segment) (Stats, error)
}
