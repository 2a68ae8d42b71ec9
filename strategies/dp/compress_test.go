package dp_test

import (
	"context"
	"encoding"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// exact is a codec that compresses nothing: a plain sum all-reduce. It
// records the keys and segments it is given.
type exact struct {
	mu   sync.Mutex
	keys []int
	segs map[int][]compress.Segment
}

func (*exact) Name() string { return "exact" }

func (e *exact) AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, segs []compress.Segment) (compress.Stats, error) {
	e.mu.Lock()
	e.keys = append(e.keys, key)
	if e.segs == nil {
		e.segs = map[int][]compress.Segment{}
	}
	e.segs[key] = segs
	e.mu.Unlock()
	return compress.Stats{Raw: int64(4 * len(buf)), Sent: int64(4 * len(buf))}, prims.AllReduce(ctx, c, buf, prims.Sum[float32]())
}

// TestCompressedHook: DDP through the compression hook with a codec that
// loses nothing trains as one process does; the codec sees every bucket
// once a step, in bucket order, with its parameters as matrices; with one
// rank it is never called.
func TestCompressedHook(t *testing.T) {
	want := reference(t, newModel)
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("np=%d", n), func(t *testing.T) {
			var got run
			codecs := make([]*exact, n)
			spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
				codecs[w.Rank()] = &exact{}
				r, err := train(ctx, t, w.Comm, newModel, dp.Config{Hook: dp.WithCompression(codecs[w.Rank()]), BucketCap: 1 << 10}, 1)
				if w.Rank() == 0 {
					got = r
				}
				return err
			})
			if t.Failed() {
				return
			}
			same(t, fmt.Sprintf("np=%d", n), got, want)
			c := codecs[0]
			if n == 1 {
				if len(c.keys) != 0 {
					t.Fatalf("one rank: the codec was called %d times, want none", len(c.keys))
				}
				return
			}
			buckets := len(c.segs)
			if buckets < 2 || len(c.keys) != steps*buckets {
				t.Fatalf("%d calls for %d buckets over %d steps", len(c.keys), buckets, steps)
			}
			for i, k := range c.keys {
				if k != i%buckets {
					t.Fatalf("call %d was bucket %d, want %d: buckets must go in order", i, k, i%buckets)
				}
			}
			// A weight a bucket holds whole is an [in, out] matrix (fc3's,
			// 24x5); one cut across buckets is vectors.
			var shapes []compress.Segment
			for _, segs := range c.segs {
				shapes = append(shapes, segs...)
			}
			if !slices.ContainsFunc(shapes, func(s compress.Segment) bool { return s.Rows == 24 && s.Cols == classes }) {
				t.Errorf("no segment is fc3's 24x5 weight: %v", shapes)
			}
		})
	}
}

// TestEveryCodec: each codec through DDP at 2 and 4 ranks leaves every
// rank with the same parameters after every step, and trains (the loss
// after 20 steps is below the first step's).
func TestEveryCodec(t *testing.T) {
	for _, spec := range []string{"fp16", "bf16", "topk:0.1", "randk:0.1", "sign", "qsgd:16", "powersgd:2"} {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/np=%d", spec, n), func(t *testing.T) {
				spmdtest.Run(t, n, func(ctx context.Context, w *spmd.World) error {
					codec, err := compress.Parse(spec, seed)
					if err != nil {
						return err
					}
					m := newModel()
					d, err := dp.New(ctx, w.Comm, m, dp.Config{Hook: dp.WithCompression(codec), BucketCap: 1 << 10})
					if err != nil {
						return err
					}
					defer d.Close()
					opt := newOpt(t, m.Store())
					s, err := data.NewSampler(examples, globalBatch, w.Rank(), w.Size(), seed, true)
					if err != nil {
						return err
					}
					var first, last float32
					for step := range steps {
						loss, err := d.Step(ctx, batches(t, s, step, 1), opt)
						if err != nil {
							return err
						}
						if last, err = d.MeanLoss(ctx, loss); err != nil {
							return err
						}
						if step == 0 {
							first = last
						}
						if err := identical(ctx, w.Comm, m.Store().W); err != nil {
							return fmt.Errorf("step %d: %w", step, err)
						}
					}
					if !(last < first) {
						return fmt.Errorf("loss %v after %d steps, %v at the first: it does not train", last, steps, first)
					}
					return nil
				})
			})
		}
	}
}

// identical fails unless every rank of c holds the same w, bit for bit.
func identical(ctx context.Context, c *spmd.Comm, w []float32) error {
	hi, lo := slices.Clone(w), slices.Clone(w)
	if err := prims.AllReduce(ctx, c, hi, prims.Max[float32]()); err != nil {
		return err
	}
	if err := prims.AllReduce(ctx, c, lo, prims.Min[float32]()); err != nil {
		return err
	}
	for i := range w {
		if hi[i] != lo[i] {
			return fmt.Errorf("parameter element %d differs between ranks: %v to %v", i, lo[i], hi[i])
		}
	}
	return nil
}

// TestCompressedResume: a compressed DDP run stopped after 7 steps and
// resumed in new processes' stead (a new model, optimizer, codec and
// DDP, given the parameters, the optimizer's state and each rank's codec
// state, compress's encoding.BinaryMarshaler) ends with the parameters of
// the uninterrupted run, bit for bit, as an uncompressed run does from
// its checkpoint; without the codec's state it does not.
func TestCompressedResume(t *testing.T) {
	const stop = 7
	for _, spec := range []string{"topk:0.1", "randk:0.1", "sign", "qsgd:16", "powersgd:2"} {
		t.Run(spec, func(t *testing.T) {
			spmdtest.Run(t, 2, func(ctx context.Context, w *spmd.World) error {
				s, err := data.NewSampler(examples, globalBatch, w.Rank(), w.Size(), seed, true)
				if err != nil {
					return err
				}
				// train runs steps [from, to) from the parameters, optimizer
				// state and codec state given (nil: from the start).
				type saved struct {
					w     []float32
					optim [][]float32
					steps [][]int64
					codec []byte
				}
				train := func(from, to int, in *saved) (*saved, error) {
					codec, _ := compress.Parse(spec, seed)
					m := newModel()
					opt := newOpt(t, m.Store())
					if in != nil {
						copy(m.Store().W, in.w)
						for i, st := range opt.State() {
							copy(st.F32, in.optim[i])
							copy(st.I64, in.steps[i])
						}
						if in.codec != nil {
							if err := codec.(encoding.BinaryUnmarshaler).UnmarshalBinary(in.codec); err != nil {
								return nil, err
							}
						}
					}
					d, err := dp.New(ctx, w.Comm, m, dp.Config{Hook: dp.WithCompression(codec), BucketCap: 1 << 10})
					if err != nil {
						return nil, err
					}
					defer d.Close()
					for step := from; step < to; step++ {
						if _, err := d.Step(ctx, batches(t, s, step, 1), opt); err != nil {
							return nil, err
						}
					}
					out := &saved{w: slices.Clone(m.Store().W)}
					for _, st := range opt.State() {
						out.optim = append(out.optim, slices.Clone(st.F32))
						out.steps = append(out.steps, slices.Clone(st.I64))
					}
					out.codec, err = codec.(encoding.BinaryMarshaler).MarshalBinary()
					return out, err
				}
				whole, err := train(0, steps, nil)
				if err != nil {
					return err
				}
				half, err := train(0, stop, nil)
				if err != nil {
					return err
				}
				resumed, err := train(stop, steps, half)
				if err != nil {
					return err
				}
				if !slices.Equal(resumed.w, whole.w) {
					return fmt.Errorf("resumed at step %d with the codec's state: the parameters differ from the uninterrupted run's", stop)
				}
				half.codec = nil
				lost, err := train(stop, steps, half)
				if err != nil {
					return err
				}
				if slices.Equal(lost.w, whole.w) {
					return fmt.Errorf("resumed without the codec's state, the run still ends as the uninterrupted one: the test cannot see the state")
				}
				return nil
			})
		})
	}
}

// TestCompressedOneRank: with one rank a lossy codec has nothing to
// exchange: DDP through its hook trains exactly as without it, and the
// hook reports no bytes.
func TestCompressedOneRank(t *testing.T) {
	want := reference(t, newModel)
	for _, spec := range []string{"topk:0.01", "sign", "powersgd:2", "fp16"} {
		t.Run(spec, func(t *testing.T) {
			var got run
			var stats compress.Stats
			spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
				codec, err := compress.Parse(spec, seed)
				if err != nil {
					return err
				}
				hook := dp.WithCompression(codec)
				got, err = train(ctx, t, w.Comm, newModel, dp.Config{Hook: hook, BucketCap: 1 << 10}, 1)
				stats = hook.Stats()
				return err
			})
			if t.Failed() {
				return
			}
			same(t, spec, got, want)
			if stats != (compress.Stats{}) {
				t.Errorf("Stats %+v, want zero: nothing was sent", stats)
			}
		})
	}
}
