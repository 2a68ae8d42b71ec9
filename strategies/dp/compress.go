package dp

import (
	"context"
	"sync"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Compressed is the hook that reduces each bucket through a gradient
// compressor (compress.Codec: fp16, top-k, PowerSGD, ...) and divides the
// sum by the number of ranks, as PyTorch's communication hooks do. The
// codec runs each bucket's exchange on a goroutine of its own, which
// waits for the bucket before it, so that every rank makes the codec's
// collectives in bucket order while backward goes on. A codec with error
// feedback keeps its residuals by bucket index. Stats says what the
// codec put on the wire. On a communicator of one rank there is nothing
// to exchange: the codec does not run, the gradients stay exact and Stats
// stays zero, as a PyTorch DDP communication hook has nothing to compress
// at world size 1.
type Compressed struct {
	codec compress.Codec

	mu    sync.Mutex // protects the following
	last  chan struct{}
	stats compress.Stats
}

// WithCompression returns a hook that compresses every bucket with codec
// (Config.Hook).
func WithCompression(codec compress.Codec) *Compressed { return &Compressed{codec: codec} }

var _ Hook = (*Compressed)(nil)

// Start queues the bucket's compressed all-reduce behind the bucket
// before it; with one rank it has nothing to do.
func (h *Compressed) Start(ctx context.Context, c *spmd.Comm, b *Bucket) (Work, error) {
	w := &codecWork{done: make(chan struct{}), grads: b.Grads, n: c.Size()}
	if c.Size() == 1 {
		close(w.done)
		return w, nil
	}
	segs := Segments(b.Params, b.Lo, b.Hi)
	h.mu.Lock()
	prev := h.last
	h.last = w.done
	h.mu.Unlock()
	go func() {
		defer close(w.done)
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				w.err = ctx.Err()
				return
			}
		}
		st, err := h.codec.AllReduce(ctx, c, b.Index, b.Grads, segs)
		w.err = err
		h.mu.Lock()
		h.stats.Add(st)
		h.mu.Unlock()
	}()
	return w, nil
}

// Stats returns what the codec has moved since the hook was made.
func (h *Compressed) Stats() compress.Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// Segments describes the parameters in [lo, hi) of a flat buffer as
// matrices (the first dimension by the rest), at offsets from lo, for the
// codecs that work on them (compress.Segment); a parameter the range
// holds only part of is a vector.
func Segments(params []*nn.Param, lo, hi int) []compress.Segment {
	var segs []compress.Segment
	for _, p := range params {
		plo, phi := max(p.Offset, lo), min(p.End(), hi)
		if plo >= phi {
			continue
		}
		s := compress.Segment{Off: plo - lo, Rows: 1, Cols: phi - plo}
		if plo == p.Offset && phi == p.End() && len(p.Shape) >= 2 {
			s.Rows, s.Cols = p.Shape[0], p.Len()/p.Shape[0]
		}
		segs = append(segs, s)
	}
	return segs
}

type codecWork struct {
	done  chan struct{}
	err   error // set before done is closed
	grads []float32
	n     int
}

// Done is closed when the exchange completes.
func (w *codecWork) Done() <-chan struct{} { return w.done }

func (w *codecWork) Wait(ctx context.Context) error {
	select {
	case <-w.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.err != nil {
		return w.err
	}
	if w.n > 1 {
		scale(w.grads, 1/float32(w.n))
	}
	return nil
}
