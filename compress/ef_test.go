package compress

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

func TestResidualsApply(t *testing.T) {
	type step struct {
		key     int
		buf     []float32
		write   []float32 // written to the returned storage, if not nil
		wantBuf []float32
		wantErr string
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"first apply adds nothing", []step{
			{key: 1, buf: []float32{1, 2}, wantBuf: []float32{1, 2}},
		}},
		{"second apply adds what was written", []step{
			{key: 1, buf: []float32{1, 2}, write: []float32{0.5, -1}, wantBuf: []float32{1, 2}},
			{key: 1, buf: []float32{1, 2}, wantBuf: []float32{1.5, 1}},
		}},
		{"storage left alone keeps the residual", []step{
			{key: 1, buf: []float32{1}, write: []float32{3}, wantBuf: []float32{1}},
			{key: 1, buf: []float32{1}, wantBuf: []float32{4}},
			{key: 1, buf: []float32{1}, wantBuf: []float32{4}},
		}},
		{"keys are separate", []step{
			{key: 1, buf: []float32{1}, write: []float32{10}, wantBuf: []float32{1}},
			{key: 2, buf: []float32{1, 1}, write: []float32{20, 30}, wantBuf: []float32{1, 1}},
			{key: 1, buf: []float32{0}, wantBuf: []float32{10}},
			{key: 2, buf: []float32{0, 0}, wantBuf: []float32{20, 30}},
		}},
		{"negative and large keys", []step{
			{key: -7, buf: []float32{1}, write: []float32{2}, wantBuf: []float32{1}},
			{key: math.MaxInt, buf: []float32{1}, wantBuf: []float32{1}},
			{key: -7, buf: []float32{1}, wantBuf: []float32{3}},
		}},
		{"length change fails and changes nothing", []step{
			{key: 1, buf: []float32{1, 2}, write: []float32{5, 6}, wantBuf: []float32{1, 2}},
			{key: 1, buf: []float32{1, 2, 3}, wantBuf: []float32{1, 2, 3}, wantErr: "bucket 1 has 3 elements, but its residual from the last step has 2"},
			{key: 1, buf: []float32{0, 0}, wantBuf: []float32{5, 6}},
		}},
		{"empty bucket", []step{
			{key: 0, buf: []float32{}, wantBuf: []float32{}},
			{key: 0, buf: []float32{}, wantBuf: []float32{}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Residuals
			for i, s := range c.steps {
				res, err := r.Apply(s.key, s.buf)
				if s.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), s.wantErr) {
						t.Fatalf("step %d: err %v, want one saying %q", i, err, s.wantErr)
					}
				} else if err != nil {
					t.Fatalf("step %d: %v", i, err)
				} else if len(res) != len(s.buf) {
					t.Fatalf("step %d: storage of %d elements for a bucket of %d", i, len(res), len(s.buf))
				}
				if !slices.Equal(s.buf, s.wantBuf) {
					t.Fatalf("step %d: buf %v, want %v", i, s.buf, s.wantBuf)
				}
				copy(res, s.write)
			}
		})
	}
}

func TestResidualsResetAndBytes(t *testing.T) {
	var r Residuals
	if r.Residual(3) != nil || r.Bytes() != 0 {
		t.Fatalf("empty store has residual %v, %d bytes", r.Residual(3), r.Bytes())
	}
	res, _ := r.Apply(3, make([]float32, 10))
	res[0] = 7
	r.Apply(4, make([]float32, 5))
	if got := r.Residual(3); len(got) != 10 || got[0] != 7 {
		t.Fatalf("Residual(3) = %v, want the storage written", got)
	}
	if got := r.Bytes(); got != 60 {
		t.Fatalf("Bytes = %d, want 60", got)
	}
	r.Reset(3)
	if r.Residual(3) != nil || r.Bytes() != 20 {
		t.Fatalf("after Reset(3): residual %v, %d bytes, want nil and 20", r.Residual(3), r.Bytes())
	}
	buf := []float32{1, 2, 3}
	if _, err := r.Apply(3, buf); err != nil || !slices.Equal(buf, []float32{1, 2, 3}) {
		t.Fatalf("Apply after Reset: %v, buf %v, want a fresh zero residual", err, buf)
	}
}

// TestEFBucketChange: a key given a bucket of another length is refused
// by every error-feedback codec, with a message that says what a user of
// the Codec can do (the codec's Residuals are out of reach, so no
// "Reset"), and the key's residual is kept.
func TestEFBucketChange(t *testing.T) {
	for _, c := range efCodecs {
		t.Run(c.name, func(t *testing.T) {
			spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
				codec, err := c.new()
				if err != nil {
					return err
				}
				if _, err := codec.AllReduce(ctx, w.Comm, 5, []float32{1, 2, 3, 4}, nil); err != nil {
					return err
				}
				_, err = codec.AllReduce(ctx, w.Comm, 5, make([]float32, 6), nil)
				if err == nil || strings.Contains(err.Error(), "Reset") ||
					!strings.Contains(err.Error(), "bucket 5 has 6 elements, but its residual from the last step has 4") ||
					!strings.Contains(err.Error(), "make a new codec") {
					return fmt.Errorf("a changed bucket: err %v, want one naming the lengths and saying to make a new codec", err)
				}
				if len(c.ef(codec).Residual(5)) != 4 {
					return fmt.Errorf("the refused call changed the residual: %v", c.ef(codec).Residual(5))
				}
				return nil
			})
		})
	}
}

// efCodecs are the codecs with error feedback, with their residuals and
// whether what they send plus their new residual is p bit for bit.
var efCodecs = []struct {
	name  string
	new   func() (Codec, error)
	ef    func(Codec) *Residuals
	exact bool
}{
	{"topk:0.1", func() (Codec, error) { return NewTopK(0.1) }, func(c Codec) *Residuals { return &c.(*topK).ef }, true},
	{"topk:1", func() (Codec, error) { return NewTopK(1) }, func(c Codec) *Residuals { return &c.(*topK).ef }, true},
	{"randk:0.25", func() (Codec, error) { return NewRandomK(0.25, 9) }, func(c Codec) *Residuals { return &c.(*randomK).ef }, true},
	{"sign", func() (Codec, error) { return NewSign(), nil }, func(c Codec) *Residuals { return &c.(*signSGD).ef }, false},
}

// efKeys are the buckets of the error-feedback tests: key and length.
var efKeys = []struct{ key, n int }{{0, 64}, {1, 1}, {7, 33}, {-2, 200}}

// TestEFInvariant runs each error-feedback codec alone (one rank, so the
// bucket it returns is what it sent) over random steps of several keys
// interleaved, and checks, at every step, that what it sent plus its new
// residual is p = gradient + old residual: bit for bit for top-k and
// random-k (every element goes one way or the other); for sign, the
// residual is p - sent rounded once to float32, exact where Sterbenz's
// lemma says so. Over all steps, what it sent plus the final residual is
// the sum of the gradients: bit for bit for top-k and random-k when the
// gradients are integers (every float32 sum is then exact), and within
// the rounding of the steps' additions otherwise.
func TestEFInvariant(t *testing.T) {
	for _, cc := range efCodecs {
		for _, ints := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/integers=%v", cc.name, ints), func(t *testing.T) {
				spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
					return efSteps(ctx, t, w.Comm, cc.new, cc.ef, cc.exact, ints)
				})
			})
		}
	}
}

// efTally is what a key's steps sent and received, in float64, and the
// bound on the rounding so far.
type efTally struct{ g, sent, bound []float64 }

func efSteps(ctx context.Context, t *testing.T, c *spmd.Comm, newCodec func() (Codec, error), efOf func(Codec) *Residuals, exact, ints bool) error {
	codec, err := newCodec()
	if err != nil {
		return err
	}
	ef := efOf(codec)
	rng := rand.New(rand.NewPCG(1, 2))
	tally := map[int]*efTally{}
	for step := range 60 {
		b := efKeys[rng.IntN(len(efKeys))]
		g := randGrad(rng, b.n, ints)
		old := slices.Clone(ef.Residual(b.key))
		if old == nil {
			old = make([]float32, b.n)
		}
		p := make([]float32, b.n)
		for i := range p {
			p[i] = g[i] + old[i]
		}
		sent := slices.Clone(g)
		if _, err := codec.AllReduce(ctx, c, b.key, sent, nil); err != nil {
			return err
		}
		res := ef.Residual(b.key)
		for i := range p {
			if err := checkSplit(p[i], sent[i], res[i], exact); err != nil {
				return fmt.Errorf("step %d, key %d, element %d: %w", step, b.key, i, err)
			}
		}
		ty := tally[b.key]
		if ty == nil {
			ty = &efTally{make([]float64, b.n), make([]float64, b.n), make([]float64, b.n)}
			tally[b.key] = ty
		}
		for i := range p {
			ty.g[i] += float64(g[i])
			ty.sent[i] += float64(sent[i])
			ty.bound[i] += ulp(p[i])/2 + ulp(res[i])/2
		}
	}
	for key, ty := range tally {
		res := ef.Residual(key)
		for i := range res {
			got := ty.sent[i] + float64(res[i])
			bound := ty.bound[i]
			if exact && ints {
				bound = 0
			}
			if math.Abs(got-ty.g[i]) > bound {
				return fmt.Errorf("key %d, element %d: sent %v + residual %v = %v, want the gradients' sum %v within %v",
					key, i, ty.sent[i], res[i], got, ty.g[i], bound)
			}
		}
	}
	return nil
}

// checkSplit checks that sent and residual r split p: exactly, one of
// them zero, if exact; else r is p - sent rounded once to float32.
func checkSplit(p, sent, r float32, exact bool) error {
	if exact {
		if !(same(sent, p) && r == 0 || sent == 0 && same(r, p)) {
			return fmt.Errorf("p %v became sent %v and residual %v, want one of them p, bit for bit, and the other 0", p, sent, r)
		}
		return nil
	}
	if !same(r, p-sent) {
		return fmt.Errorf("residual %v, want p %v - sent %v = %v", r, p, sent, p-sent)
	}
	if d := math.Abs(float64(r) + float64(sent) - float64(p)); d > ulp(r)/2 {
		return fmt.Errorf("residual %v + sent %v is %v off p %v, more than half an ulp", r, sent, d, p)
	}
	s := math.Abs(float64(sent))
	if a := math.Abs(float64(p)); (p < 0) == (sent < 0) && s/2 <= a && a <= 2*s && float64(r)+float64(sent) != float64(p) {
		return fmt.Errorf("residual %v + sent %v is not p %v, which Sterbenz's lemma makes exact", r, sent, p)
	}
	return nil
}

// TestEFSkipsNonFinite checks that a bucket with a NaN or an Inf makes
// the sum non-finite and leaves each error-feedback codec's residual as
// it was, and that the next step goes on from it.
func TestEFSkipsNonFinite(t *testing.T) {
	for _, cc := range efCodecs {
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			t.Run(fmt.Sprintf("%s/%v", cc.name, bad), func(t *testing.T) {
				spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
					codec, err := cc.new()
					if err != nil {
						return err
					}
					rng := rand.New(rand.NewPCG(3, 4))
					if _, err := codec.AllReduce(ctx, w.Comm, 5, randGrad(rng, 40, false), nil); err != nil {
						return err
					}
					before := slices.Clone(cc.ef(codec).Residual(5))
					g := randGrad(rng, 40, false)
					g[17] = bad
					if _, err := codec.AllReduce(ctx, w.Comm, 5, g, nil); err != nil {
						return err
					}
					if finiteAll(g) {
						return fmt.Errorf("sum %v is finite, want a NaN or an Inf that a loss scaler sees", g)
					}
					if after := cc.ef(codec).Residual(5); !sameBits(after, before) {
						return fmt.Errorf("residual changed from %v to %v on a skipped step", before, after)
					}
					g = randGrad(rng, 40, false)
					if _, err := codec.AllReduce(ctx, w.Comm, 5, g, nil); err != nil || !finiteAll(g) || !finiteAll(cc.ef(codec).Residual(5)) {
						return fmt.Errorf("step after the skipped one: err %v, sum %v", err, g)
					}
					return nil
				})
			})
		}
	}
}

// randGrad is a random gradient of n elements: integers in [-40, 40]
// (many ties), or normal numbers of several magnitudes.
func randGrad(rng *rand.Rand, n int, ints bool) []float32 {
	g := make([]float32, n)
	for i := range g {
		if ints {
			g[i] = float32(rng.IntN(81) - 40)
		} else {
			g[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
		}
	}
	return g
}

// ulp is the gap between |x| and the next float32 up.
func ulp(x float32) float64 {
	a := float32(math.Abs(float64(x)))
	return float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
}

// same reports whether a and b have the same bits.
func same(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// sameBits reports whether a and b have the same length and bits.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, same)
}

// refCodec is a test's own, naive version of a codec on one rank: the
// vector the codec sends for gradient g of key's step-th bucket.
type refCodec interface {
	contrib(rank, key int, step uint64, g []float32) []float32
}

// bucketStep is one call of a multi-rank test: the bucket's key and
// length.
type bucketStep struct{ key, n int }

// rankSteps are the calls of the multi-rank tests: several keys
// interleaved, of lengths 1, 3, 100 and 1000.
var rankSteps = []bucketStep{{0, 100}, {1, 3}, {2, 1000}, {0, 100}, {3, 1}, {1, 3}, {0, 100}, {2, 1000}, {3, 1}, {0, 100}, {2, 1000}}

// checkRanks runs newCodec on p ranks through rankSteps, the gradient of
// rank r at step s from seed (r, s), and checks that every rank ends
// every step with the same bits, the sum, in rank order, of the vectors
// that ref says each rank sent, and that Stats says sent(n) bytes.
func checkRanks(t *testing.T, p int, newCodec func() (Codec, error), newRef func() refCodec, sent func(n, p int) int64) {
	t.Helper()
	out := make([][][]float32, p)
	spmdtest.Run(t, p, func(ctx context.Context, w *spmd.World) error {
		codec, err := newCodec()
		if err != nil {
			return err
		}
		r := w.Rank()
		for s, b := range rankSteps {
			buf := rankGrad(r, s, b.n)
			st, err := codec.AllReduce(ctx, w.Comm, b.key, buf, nil)
			if err != nil {
				return err
			}
			if want := (Stats{Raw: 4 * int64(b.n), Sent: sent(b.n, p)}); st != want {
				return fmt.Errorf("step %d: stats %+v, want %+v", s, st, want)
			}
			out[r] = append(out[r], buf)
		}
		return nil
	})
	if t.Failed() {
		return
	}
	refs := make([]refCodec, p)
	for r := range refs {
		refs[r] = newRef()
	}
	steps := map[int]uint64{}
	for s, b := range rankSteps {
		want := make([]float32, b.n)
		for r := range p {
			for i, v := range refs[r].contrib(r, b.key, steps[b.key], rankGrad(r, s, b.n)) {
				want[i] += v
			}
		}
		steps[b.key]++
		for r := range p {
			if !sameBits(out[r][s], want) {
				t.Fatalf("step %d (key %d), rank %d of %d: got\n%v\nwant the sum of the ranks' contributions\n%v", s, b.key, r, p, out[r][s], want)
			}
		}
	}
}

// rankGrad is rank r's integer gradient of n elements at step s.
func rankGrad(r, s, n int) []float32 {
	return randGrad(rand.New(rand.NewPCG(uint64(r), uint64(s))), n, true)
}
