package compress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
)

func newPowerSGD(tb testing.TB, cfg PowerSGDConfig) *powerSGD {
	tb.Helper()
	c, err := NewPowerSGD(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c.(*powerSGD)
}

// residual is key's residual laid out as its bucket (zero where plain),
// nil before the key's first call.
func (p *powerSGD) residual(key int) []float32 {
	st, ok := p.keys[key]
	if !ok {
		return nil
	}
	out := make([]float32, st.size)
	if st.resid == nil {
		return out
	}
	for _, mt := range st.mats {
		copy(out[mt.off:mt.off+mt.n*mt.m], st.resid[mt.roff:])
	}
	return out
}

// lowRankMatrix is an n x m matrix of rank k (A·B with normal A, B).
func lowRankMatrix(rng *rand.Rand, n, m, k int) []float32 {
	a, b := normal(rng, n*k), normal(rng, k*m)
	out := make([]float32, n*m)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			var s float32
			for l := 0; l < k; l++ {
				s += a[i*k+l] * b[l*m+j]
			}
			out[i*m+j] = s
		}
	}
	return out
}

func normal(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// dist is the Frobenius norm of a - b, in float64.
func dist(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

func norm(a []float32) float64 { return dist(a, make([]float32, len(a))) }

func scaled(a []float32, f float32) []float32 {
	out := make([]float32, len(a))
	for i, v := range a {
		out[i] = v * f
	}
	return out
}

// step runs one AllReduce of codec on every rank: bufs[r] in, out.
func step(t *testing.T, codecs []*powerSGD, key int, bufs [][]float32, segs []Segment) []Stats {
	t.Helper()
	stats := make([]Stats, len(codecs))
	spmdtest.Run(t, len(codecs), func(ctx context.Context, w *spmd.World) error {
		r := w.Comm.Rank()
		var err error
		stats[r], err = codecs[r].AllReduce(ctx, w.Comm, key, bufs[r], segs)
		return err
	})
	return stats
}

func TestPowerSGDConfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     PowerSGDConfig
		wantErr bool
	}{
		{"default", DefaultPowerSGDConfig(), false},
		{"rank 1, zero MinCompression means 2", PowerSGDConfig{Rank: 1}, false},
		{"rank 0", PowerSGDConfig{}, true},
		{"negative rank", PowerSGDConfig{Rank: -3}, true},
		{"negative warmup", PowerSGDConfig{Rank: 2, WarmupSteps: -1}, true},
		{"negative MinCompression", PowerSGDConfig{Rank: 2, MinCompression: -1}, true},
		{"NaN MinCompression", PowerSGDConfig{Rank: 2, MinCompression: math.NaN()}, true},
		{"Inf MinCompression", PowerSGDConfig{Rank: 2, MinCompression: math.Inf(1)}, true},
	} {
		codec, err := NewPowerSGD(c.cfg)
		if (err != nil) != c.wantErr {
			t.Errorf("%s: NewPowerSGD(%+v) error = %v, want error %v", c.name, c.cfg, err, c.wantErr)
			continue
		}
		if err == nil {
			if want := fmt.Sprintf("powersgd:%d", c.cfg.Rank); codec.Name() != want {
				t.Errorf("%s: Name() = %q, want %q", c.name, codec.Name(), want)
			}
			if got := codec.(*powerSGD).cfg.MinCompression; got < 1 {
				t.Errorf("%s: MinCompression = %g, want its default", c.name, got)
			}
		}
	}
}

// Segments that do not fit the bucket, and a layout that changes, are
// errors wrapping ErrSegments, before any communication.
func TestPowerSGDSegmentErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		segs []Segment
	}{
		{"past the end", []Segment{{Off: 90, Rows: 4, Cols: 4}}},
		{"negative offset", []Segment{{Off: -1, Rows: 2, Cols: 2}}},
		{"negative rows", []Segment{{Off: 0, Rows: -2, Cols: 2}}},
		{"huge", []Segment{{Off: 0, Rows: math.MaxInt / 2, Cols: 4}}},
		{"overlapping", []Segment{{Off: 0, Rows: 8, Cols: 8}, {Off: 60, Rows: 2, Cols: 2}}},
	} {
		p := newPowerSGD(t, PowerSGDConfig{Rank: 2})
		_, err := p.AllReduce(context.Background(), nil, 1, make([]float32, 100), c.segs)
		if !errors.Is(err, ErrSegments) {
			t.Errorf("%s: error %v, want one wrapping ErrSegments", c.name, err)
		}
	}
	p := newPowerSGD(t, PowerSGDConfig{Rank: 2})
	segs := []Segment{{Off: 0, Rows: 10, Cols: 10}}
	step(t, []*powerSGD{p}, 7, [][]float32{make([]float32, 100)}, segs)
	for _, c := range []struct {
		name string
		size int
		segs []Segment
	}{
		{"other length", 101, segs},
		{"other segments", 100, []Segment{{Off: 0, Rows: 20, Cols: 5}}},
	} {
		_, err := p.AllReduce(context.Background(), nil, 7, make([]float32, c.size), c.segs)
		if !errors.Is(err, ErrSegments) {
			t.Errorf("%s: error %v, want one wrapping ErrSegments", c.name, err)
		}
	}
}

// A matrix of rank at most r comes back exactly (to float32 rounding)
// after one step, from a random start: P = M·Q spans M's columns.
func TestPowerSGDExactOnLowRank(t *testing.T) {
	const n, m, r = 40, 30, 4
	for _, ranks := range []int{1, 2} {
		for k := 1; k <= r; k++ {
			t.Run(fmt.Sprintf("ranks=%d/rank(M)=%d", ranks, k), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(k), 1))
				M := lowRankMatrix(rng, n, m, k)
				segs := []Segment{{Off: 0, Rows: n, Cols: m}}
				codecs := make([]*powerSGD, ranks)
				bufs := make([][]float32, ranks)
				for i := range codecs {
					codecs[i] = newPowerSGD(t, PowerSGDConfig{Rank: r, Seed: 3})
					bufs[i] = append([]float32(nil), M...)
				}
				stats := step(t, codecs, 0, bufs, segs)
				want := scaled(M, float32(ranks))
				tol := 1e-5 * norm(want)
				for i := range bufs {
					if d := dist(bufs[i], want); d > tol {
						t.Errorf("rank %d: ‖buf - %d·M‖ = %g, want at most %g", i, ranks, d, tol)
					}
					if e := norm(codecs[i].residual(0)); e > tol {
						t.Errorf("rank %d: ‖residual‖ = %g, want at most %g", i, e, tol)
					}
					if want := int64(4 * (n + m) * r); stats[i].Sent != want || stats[i].Raw != 4*n*m {
						t.Errorf("rank %d: stats %+v, want Raw %d, Sent %d", i, stats[i], 4*n*m, want)
					}
				}
			})
		}
	}
}

// approximateOnce runs one step of a fresh codec of rank r on M alone and
// returns ‖M - approximation‖.
func approximateOnce(t *testing.T, M []float32, n, m, r int) float64 {
	p := newPowerSGD(t, PowerSGDConfig{Rank: r, Seed: 5})
	buf := append([]float32(nil), M...)
	step(t, []*powerSGD{p}, 0, [][]float32{buf}, []Segment{{Rows: n, Cols: m}})
	return dist(M, buf)
}

// For a full-rank matrix the error falls as r grows (the starting Qs are
// nested, so the subspaces are), and with warm start it falls over
// steps towards the best rank-r error, ‖M - M_r‖ (Eckart-Young).
func TestPowerSGDErrorFalls(t *testing.T) {
	const n, m = 64, 48
	rng := rand.New(rand.NewPCG(9, 9))
	M := normal(rng, n*m)
	last := math.Inf(1)
	for _, r := range []int{1, 2, 4, 8} {
		e := approximateOnce(t, M, n, m, r)
		t.Logf("rank %d: ‖M - approx‖/‖M‖ = %.4f", r, e/norm(M))
		if !(e < last) {
			t.Errorf("rank %d: error %g, not below the smaller rank's %g", r, e, last)
		}
		last = e
	}

	// Singular values falling as 0.8^k: subspace iteration converges at
	// about 0.8 a step.
	const r = 2
	D := make([]float32, n*m)
	for k := 0; k < 16; k++ {
		for i, v := range lowRankMatrix(rng, n, m, 1) {
			D[i] += float32(math.Pow(0.8, float64(k))) * v
		}
	}
	best := bestError(D, n, m, r)
	p := newPowerSGD(t, PowerSGDConfig{Rank: r, Seed: 2})
	var errs []float64
	spmdtest.Run(t, 1, func(ctx context.Context, w *spmd.World) error {
		for s := 0; s < 8; s++ {
			buf := append([]float32(nil), D...)
			if _, err := p.AllReduce(ctx, w.Comm, 0, buf, []Segment{{Rows: n, Cols: m}}); err != nil {
				return err
			}
			clear(p.keys[0].resid) // the same M at every step: no error feedback
			errs = append(errs, dist(D, buf))
		}
		return nil
	})
	t.Logf("best %g, over steps %.6g", best, errs)
	for s := 1; s < len(errs); s++ {
		if errs[s] > errs[s-1]*(1+1e-5) {
			t.Errorf("step %d: error %g, above step %d's %g", s, errs[s], s-1, errs[s-1])
		}
	}
	if got := errs[len(errs)-1]; !(errs[0] > got) || got > best*(1+1e-3) {
		t.Errorf("error %g after %d steps (first %g), want it fallen to within 0.1%% of the best, %g", got, len(errs), errs[0], best)
	}
}

// bestError is ‖M - M_r‖ for the best rank-r M_r: the root of the sum of
// the squares of M's singular values past the r-th.
func bestError(M []float32, n, m, r int) float64 {
	d := make([]float64, len(M))
	for i, v := range M {
		d[i] = float64(v)
	}
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(n, m, d), mat.SVDNone) {
		panic("SVD did not converge")
	}
	var s float64
	for _, v := range svd.Values(nil)[r:] {
		s += v * v
	}
	return math.Sqrt(s)
}

// The invariant of error feedback, at every step and rank: Mᵢ = g + E
// (old residual) splits into the new residual E' and a contribution
// Cᵢ = Mᵢ - E', and the contributions sum to buf; so over all steps, the
// sum of bufs plus the final residuals is the sum of all gradients.
// Tolerance: float32 rounding on values of a few units, 1e-4 per element
// (measured a few 1e-6 per step, 1e-5 over 30 steps).
func TestPowerSGDErrorFeedback(t *testing.T) {
	const ranks, steps, n, m, key = 3, 30, 24, 20, 3
	segs := []Segment{{Off: 0, Rows: n, Cols: m}, {Off: n * m, Rows: 1, Cols: 7}}
	size := n*m + 7 + 5 // 5 floats no segment covers
	codecs := make([]*powerSGD, ranks)
	for i := range codecs {
		codecs[i] = newPowerSGD(t, PowerSGDConfig{Rank: 2, Seed: 11})
	}
	// grads[s][i], contrib[s][i] and bufs[s][i]: rank i at step s.
	grads, contrib, bufs := grid[float32](steps, ranks), grid[float64](steps, ranks), grid[float32](steps, ranks)
	spmdtest.Run(t, ranks, func(ctx context.Context, w *spmd.World) error {
		i := w.Comm.Rank()
		rng := rand.New(rand.NewPCG(uint64(i), 77))
		for s := 0; s < steps; s++ {
			grads[s][i] = normal(rng, size)
			old := codecs[i].residual(key)
			if old == nil {
				old = make([]float32, size)
			}
			buf := append([]float32(nil), grads[s][i]...)
			if _, err := codecs[i].AllReduce(ctx, w.Comm, key, buf, segs); err != nil {
				return err
			}
			now := codecs[i].residual(key)
			contrib[s][i] = make([]float64, size)
			for k := range buf {
				contrib[s][i][k] = float64(grads[s][i][k]) + float64(old[k]) - float64(now[k])
			}
			bufs[s][i] = buf
		}
		return nil
	})
	var perStep, overall float64
	total := make([]float64, size) // Σ gradients - Σ bufs - Σ final residuals
	for s := 0; s < steps; s++ {
		for k := 0; k < size; k++ {
			var c float64
			for i := 0; i < ranks; i++ {
				c += contrib[s][i][k]
				total[k] += float64(grads[s][i][k])
			}
			perStep = max(perStep, math.Abs(c-float64(bufs[s][0][k])))
			total[k] -= float64(bufs[s][0][k])
		}
	}
	for i := range codecs {
		for k, e := range codecs[i].residual(key) {
			total[k] -= float64(e)
		}
	}
	for _, v := range total {
		overall = max(overall, math.Abs(v))
	}
	t.Logf("Σᵢ Cᵢ vs buf: within %g per step; over %d steps Σ g - Σ buf - Σ E within %g", perStep, steps, overall)
	if perStep > 1e-4 {
		t.Errorf("Σᵢ (g + E - E') differs from buf by up to %g, want at most 1e-4", perStep)
	}
	if overall > 1e-4 {
		t.Errorf("Σ gradients - Σ bufs - Σ final residuals is up to %g per element, want at most 1e-4", overall)
	}
}

// grid is a steps x ranks table of slices, for ranks to fill in.
func grid[T any](steps, ranks int) [][][]T {
	g := make([][][]T, steps)
	for s := range g {
		g[s] = make([][]T, ranks)
	}
	return g
}

// Through 2 and 4 ranks: warmup steps are plain exact sums; then vectors,
// small matrices and uncovered elements are exact sums, the big matrix
// compressed; every rank ends with the same bits; Stats count it.
func TestPowerSGDRanks(t *testing.T) {
	const warmup, steps, r = 2, 5, 4
	segs := []Segment{
		{Off: 0, Rows: 1, Cols: 17},   // bias: a vector
		{Off: 17, Rows: 3, Cols: 5},   // too small to shrink 2x at rank 3
		{Off: 40, Rows: 64, Cols: 48}, // compressed; 8 floats before it are in no segment
		{Off: 40 + 64*48, Rows: 40, Cols: 1},
	}
	size := 40 + 64*48 + 40
	plain := size - 64*48
	for _, ranks := range []int{2, 4} {
		t.Run(fmt.Sprintf("ranks=%d", ranks), func(t *testing.T) {
			codecs := make([]*powerSGD, ranks)
			for i := range codecs {
				codecs[i] = newPowerSGD(t, PowerSGDConfig{Rank: r, WarmupSteps: warmup, Seed: 1})
			}
			for s := 0; s < steps; s++ {
				bufs := make([][]float32, ranks)
				want := make([]float32, size)
				for i := range bufs {
					rng := rand.New(rand.NewPCG(uint64(i), uint64(s)))
					bufs[i] = make([]float32, size)
					for k := range bufs[i] {
						bufs[i][k] = float32(rng.IntN(201) - 100) // integers: exact sums
						want[k] += bufs[i][k]
					}
				}
				olds := make([][]float32, ranks)
				for i, c := range codecs {
					if olds[i] = c.residual(5); olds[i] == nil {
						olds[i] = make([]float32, size)
					}
				}
				stats := step(t, codecs, 5, bufs, segs)
				warm := s < warmup
				for i := range bufs {
					for k := range bufs[i] {
						inMatrix := k >= 40 && k < 40+64*48
						if (warm || !inMatrix) && bufs[i][k] != want[k] {
							t.Fatalf("step %d rank %d: buf[%d] = %g, want the exact sum %g", s, i, k, bufs[i][k], want[k])
						}
						if math.Float32bits(bufs[i][k]) != math.Float32bits(bufs[0][k]) {
							t.Fatalf("step %d: rank %d's buf[%d] = %g, rank 0's %g", s, i, k, bufs[i][k], bufs[0][k])
						}
					}
					wantSent := int64(4 * size)
					if !warm {
						wantSent = int64(4 * (plain + (64+48)*r))
					}
					if stats[i] != (Stats{Raw: int64(4 * size), Sent: wantSent}) {
						t.Errorf("step %d rank %d: stats %+v, want Raw %d, Sent %d", s, i, stats[i], 4*size, wantSent)
					}
					if e := norm(codecs[i].residual(5)); warm != (e == 0) {
						t.Errorf("step %d rank %d: ‖residual‖ = %g in warmup %v", s, i, e, warm)
					}
				}
				// The matrix is Σᵢ (gᵢ + Eᵢ - Eᵢ'), to rounding.
				news := make([][]float32, ranks)
				for i, c := range codecs {
					news[i] = c.residual(5)
				}
				for k := 40; k < 40+64*48; k++ {
					c := float64(want[k])
					for i := range codecs {
						c += float64(olds[i][k]) - float64(news[i][k])
					}
					if d := math.Abs(c - float64(bufs[0][k])); d > 1e-3 {
						t.Fatalf("step %d: buf[%d] = %g, Σᵢ(g + E - E') = %g", s, k, bufs[0][k], c)
					}
				}
			}
		})
	}
}

// A gradient with an Inf or NaN makes the compressed parts NaN, for the
// caller to skip the step, and the key starts afresh: the next finite
// step is finite, with no panic.
func TestPowerSGDNonFinite(t *testing.T) {
	const n, m = 20, 16
	segs := []Segment{{Rows: n, Cols: m}, {Off: n * m, Rows: 1, Cols: 3}}
	for _, bad := range []float32{float32(math.Inf(1)), float32(math.NaN())} {
		codecs := []*powerSGD{newPowerSGD(t, PowerSGDConfig{Rank: 2}), newPowerSGD(t, PowerSGDConfig{Rank: 2})}
		rng := rand.New(rand.NewPCG(1, 2))
		bufs := [][]float32{normal(rng, n*m+3), normal(rng, n*m+3)}
		bufs[1][7] = bad
		step(t, codecs, 0, bufs, segs)
		for i, b := range bufs {
			if v := b[3]; v == v {
				t.Errorf("%g: rank %d: compressed element %g, want NaN", bad, i, v)
			}
			if v := b[n*m]; v-v != 0 {
				t.Errorf("%g: rank %d: plain element %g, want finite", bad, i, v)
			}
		}
		bufs = [][]float32{normal(rng, n*m+3), normal(rng, n*m+3)}
		step(t, codecs, 0, bufs, segs)
		for i, b := range bufs {
			if !finite(b) || !finite(codecs[i].residual(0)) {
				t.Errorf("%g: rank %d: the step after is not finite", bad, i)
			}
		}
	}
}

// Zero gradients give zero, and a zero column of P does not stick: the
// next step's Q is redrawn where it went to zero.
func TestPowerSGDZeroGradient(t *testing.T) {
	const n, m = 30, 20
	p := newPowerSGD(t, PowerSGDConfig{Rank: 3})
	buf := make([]float32, n*m)
	step(t, []*powerSGD{p}, 0, [][]float32{buf}, []Segment{{Rows: n, Cols: m}})
	if norm(buf) != 0 {
		t.Fatalf("zero gradient gave ‖buf‖ = %g", norm(buf))
	}
	M := lowRankMatrix(rand.New(rand.NewPCG(4, 4)), n, m, 3)
	buf = append([]float32(nil), M...)
	step(t, []*powerSGD{p}, 0, [][]float32{buf}, []Segment{{Rows: n, Cols: m}})
	if d := dist(buf, M); d > 1e-5*norm(M) {
		t.Errorf("rank-3 M after a zero step: ‖buf - M‖ = %g, want at most %g", d, 1e-5*norm(M))
	}
}

// BenchmarkPowerSGD is one rank's step of rank 4 on one 4096 x 4096
// gradient: four products of M with a thin matrix, two
// orthonormalisations and the error feedback, on one goroutine (gemm is
// single-threaded). Compare with testdata/powersgd_torch.py.
func BenchmarkPowerSGD(b *testing.B) {
	const n, m, r = 4096, 4096, 4
	g := normal(rand.New(rand.NewPCG(1, 1)), n*m)
	buf := make([]float32, n*m)
	segs := []Segment{{Rows: n, Cols: m}}
	p, err := NewPowerSGD(PowerSGDConfig{Rank: r})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 * n * m)
	spmdtest.Run(b, 1, func(ctx context.Context, w *spmd.World) error {
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			copy(buf, g)
			b.StartTimer()
			if _, err := p.AllReduce(ctx, w.Comm, 0, buf, segs); err != nil {
				return err
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed())/1e6/float64(b.N), "ms/call")
		return nil
	})
}
