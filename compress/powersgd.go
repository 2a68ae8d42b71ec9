package compress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/prims/kernel"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn/gemm"
)

// ErrSegments is wrapped by the errors of a codec given segments that do
// not fit its bucket (out of range, overlapping, negative) or that differ
// from those of the key's earlier calls.
var ErrSegments = errors.New("bad bucket segments")

// PowerSGDConfig configures NewPowerSGD. The zero value of a field other
// than Rank means its default.
type PowerSGDConfig struct {
	// Rank is r, the rank of each matrix's approximation P·Qᵀ (at most
	// the matrix's smaller side). At least 1.
	Rank int
	// WarmupSteps is how many calls of each key all-reduce the bucket
	// uncompressed, without error feedback, before compression starts
	// (PyTorch's start_powerSGD_iter).
	WarmupSteps int
	// MinCompression is the factor a matrix's traffic must shrink by for
	// it to be compressed: an n x m matrix is compressed only if
	// MinCompression·(n+m)·r < n·m (PyTorch's min_compression_rate).
	// 0 means 2, PyTorch's default.
	MinCompression float64
	// Seed seeds the random starting Q of every matrix; ranks of one job
	// must share it.
	Seed uint64
}

// DefaultPowerSGDConfig is rank 4, no warmup, MinCompression 2, seed 0.
func DefaultPowerSGDConfig() PowerSGDConfig {
	return PowerSGDConfig{Rank: 4, MinCompression: 2}
}

// Validate says what is wrong with c, if anything.
func (c PowerSGDConfig) Validate() error {
	switch {
	case c.Rank < 1:
		return fmt.Errorf("powersgd: rank %d: the rank of the approximation must be at least 1 (powersgd:4 is a common choice)", c.Rank)
	case c.WarmupSteps < 0:
		return fmt.Errorf("powersgd: warmup steps %d: must be 0 or more", c.WarmupSteps)
	case !(c.MinCompression >= 0) || math.IsInf(c.MinCompression, 0):
		return fmt.Errorf("powersgd: minimum compression %g: must be a finite number, 0 or more (0 means 2)", c.MinCompression)
	}
	return nil
}

// NewPowerSGD returns the PowerSGD codec (Vogels, Karimireddy and Jaggi,
// 2019, as PyTorch's powerSGD_hook runs it), named "powersgd:<rank>".
//
// A call of AllReduce adds the key's residual E to buf (M = g + E) and
// splits the bucket: each segment with more than one row and column that
// compression shrinks by MinCompression is a matrix M (n x m) sent as a
// rank-r approximation; the rest (vectors, small matrices, elements no
// segment covers) is sent plain. With Q (m x r) the key's last summed Q
// (at the first compressed call, standard normal from a PCG seeded by
// Seed, key and segment index, the same on every rank), orthonormalised,
// each rank computes P = M·Q; one all-reduce sums the plain elements and
// every matrix's P, packed; P̂ is the summed P with orthonormal columns
// (Gram-Schmidt; a column dependent on the earlier ones becomes zero);
// each rank computes Qᵢ = Mᵢᵀ·P̂ and a second all-reduce sums the Qs; buf
// becomes P̂·(ΣQᵢ)ᵀ, the sum over ranks (divide by the size for PyTorch's
// mean). So the contribution of rank i is Cᵢ = P̂·Qᵢᵀ = P̂·P̂ᵀ·Mᵢ, the
// projection of its M on the shared subspace, and it keeps the rest:
//
//	Mᵢ = Eᵢ' + Cᵢ  (Eᵢ' its new residual),  buf = Σᵢ Cᵢ  (plain parts: Σᵢ Mᵢ, Eᵢ' = 0)
//
// exact up to float32 rounding. PyTorch keeps Eᵢ' = Mᵢ - (1/N)·Σⱼ Cⱼ
// instead, the same sum over ranks but not each rank's own unsent part.
// Summed over calls, Σ buf + Σᵢ E_final = Σ gradients, so nothing is lost.
// If the summed P is not finite (a gradient with Inf or NaN), the
// matrices' elements of buf become NaN, their residuals zero and their Q
// is drawn afresh; every rank decides the same from the same P.
//
// Stats.Sent is 4 bytes for each float of the two all-reduces' inputs (or
// of buf during warmup). After an error from a collective, the key's
// residual and Q are dropped and its next call starts afresh.
func NewPowerSGD(cfg PowerSGDConfig) (Codec, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MinCompression == 0 {
		cfg.MinCompression = 2
	}
	return &powerSGD{cfg: cfg, keys: make(map[int]*powerKey)}, nil
}

var _ Codec = (*powerSGD)(nil)

// powerSGD is the codec NewPowerSGD returns; one goroutine at a time.
type powerSGD struct {
	cfg  PowerSGDConfig
	keys map[int]*powerKey
	// scratch, shared by the keys: the first all-reduce's buffer and
	// orthonormalize's float64 copy.
	first []float32
	work  []float64
}

// powerKey is the state of one bucket key.
type powerKey struct {
	calls  int
	size   int       // len(buf)
	segs   []Segment // as first given, to check later calls
	plain  []span    // elements sent plain, by offset
	nPlain int
	mats   []lowRank
	nP     int       // floats of all Ps
	work   int       // floats orthonormalize needs
	resid  []float32 // every matrix's residual E, packed (nil until used)
	q      []float32 // every matrix's Qᵀ, packed: the last sum over ranks
	fresh  bool      // q must be drawn anew
}

// span is elements [off, off+n) of a bucket.
type span struct{ off, n int }

// lowRank is a compressed matrix of a bucket: segment seg, n x m at off,
// approximated at rank r, with its residual at roff of resid (n·m), its
// Pᵀ (r x n) at poff of the first buffer after the plain elements and
// its Qᵀ (r x m) at qoff of q.
type lowRank struct {
	seg, off, n, m, r int
	roff, poff, qoff  int
}

// Name is "powersgd:<rank>".
func (p *powerSGD) Name() string { return "powersgd:" + strconv.Itoa(p.cfg.Rank) }

// AllReduce replaces buf with the sum over c's ranks of each rank's
// rank-r approximation of its gradient plus residual (see NewPowerSGD).
func (p *powerSGD) AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, segs []Segment) (Stats, error) {
	st, err := p.state(key, buf, segs)
	if err != nil {
		return Stats{}, err
	}
	raw := int64(4 * len(buf))
	st.calls++
	if st.calls <= p.cfg.WarmupSteps || len(st.mats) == 0 {
		if err := prims.AllReduce(ctx, c, buf, prims.Sum[float32]()); err != nil {
			return Stats{}, fmt.Errorf("powersgd key %d: plain all-reduce of %d floats: %w", key, len(buf), err)
		}
		return Stats{Raw: raw, Sent: raw}, nil
	}
	sent, err := p.compressed(ctx, c, key, st, buf)
	if err != nil {
		st.resid, st.fresh = nil, true
		return Stats{}, fmt.Errorf("powersgd key %d: %w", key, err)
	}
	return Stats{Raw: raw, Sent: 4 * int64(sent)}, nil
}

// compressed runs one compressed step of st on buf and says how many
// floats it sent: P and the plain elements in one all-reduce, then Q.
func (p *powerSGD) compressed(ctx context.Context, c *spmd.Comm, key int, st *powerKey, buf []float32) (int, error) {
	if st.resid == nil {
		st.resid = make([]float32, st.residLen())
	}
	p.work = grow(p.work, st.work)
	first := grow(p.first, st.nPlain+st.nP)
	p.first = first
	o := 0
	for _, s := range st.plain {
		o += copy(first[o:], buf[s.off:s.off+s.n])
	}
	pk := first[st.nPlain:]
	p.project(key, st, buf, pk)
	if err := prims.AllReduce(ctx, c, first, prims.Sum[float32]()); err != nil {
		return 0, fmt.Errorf("all-reduce of P and %d plain floats (%d floats): %w", st.nPlain, len(first), err)
	}
	o = 0
	for _, s := range st.plain {
		o += copy(buf[s.off:s.off+s.n], first[o:])
	}
	st.fresh = false
	if !finite(pk) {
		p.poison(st, buf)
		return len(first), nil
	}
	p.feedback(st, pk)
	if err := prims.AllReduce(ctx, c, st.q, prims.Sum[float32]()); err != nil {
		return 0, fmt.Errorf("all-reduce of Q (%d floats): %w", len(st.q), err)
	}
	for _, mt := range st.mats {
		pt := pk[mt.poff : mt.poff+mt.r*mt.n]
		qt := st.q[mt.qoff : mt.qoff+mt.r*mt.m]
		// buf = P̂·(ΣQᵢ)ᵀ.
		sgemm(blas.Trans, blas.NoTrans, mt.n, mt.m, mt.r, 1, pt, mt.n, qt, mt.m, 0, buf[mt.off:], mt.m)
	}
	return len(first) + len(st.q), nil
}

// project computes, for each matrix, M = g + E (in the residual's place)
// and its Pᵀ = Qᵀ·Mᵀ into pk, from the orthonormalised Q (drawn anew
// when st.fresh).
func (p *powerSGD) project(key int, st *powerKey, buf, pk []float32) {
	for _, mt := range st.mats {
		e := st.resid[mt.roff : mt.roff+mt.n*mt.m]
		kernel.AddF32(e, buf[mt.off:mt.off+len(e)])
		qt := st.q[mt.qoff : mt.qoff+mt.r*mt.m]
		if st.fresh {
			p.fillNormal(qt, key, mt.seg, st.calls)
		}
		orthonormalize(qt, mt.r, mt.m, p.work, p.refill(key, mt.seg, st.calls))
		sgemm(blas.NoTrans, blas.Trans, mt.r, mt.n, mt.m, 1, qt, mt.m, e, mt.m, 0, pk[mt.poff:], mt.n)
	}
}

// feedback orthonormalises each matrix's summed P in pk into P̂, puts
// this rank's Qᵢᵀ = P̂ᵀ·M in st.q, and leaves E' = M - P̂·Qᵢᵀ as the
// residual.
func (p *powerSGD) feedback(st *powerKey, pk []float32) {
	for _, mt := range st.mats {
		pt := pk[mt.poff : mt.poff+mt.r*mt.n]
		orthonormalize(pt, mt.r, mt.n, p.work, nil)
		e := st.resid[mt.roff : mt.roff+mt.n*mt.m]
		qt := st.q[mt.qoff : mt.qoff+mt.r*mt.m]
		sgemm(blas.NoTrans, blas.NoTrans, mt.r, mt.m, mt.n, 1, pt, mt.n, e, mt.m, 0, qt, mt.m)
		sgemm(blas.Trans, blas.NoTrans, mt.n, mt.m, mt.r, -1, pt, mt.n, qt, mt.m, 1, e, mt.m)
	}
}

// poison marks a step whose summed P was not finite: the matrices'
// elements of buf become NaN, their residuals zero, and Q is redrawn.
func (p *powerSGD) poison(st *powerKey, buf []float32) {
	nan := float32(math.NaN())
	for _, mt := range st.mats {
		seg := buf[mt.off : mt.off+mt.n*mt.m]
		for i := range seg {
			seg[i] = nan
		}
	}
	clear(st.resid)
	st.fresh = true
}

// fillNormal fills qt with standard normal draws from the PCG of (Seed,
// key, seg, call), row after row, so that a larger rank's first rows are
// a smaller rank's.
func (p *powerSGD) fillNormal(qt []float32, key, seg, call int) {
	rng := rand.New(rand.NewPCG(p.cfg.Seed, mix(uint64(key), uint64(seg), uint64(call), 0)))
	for i := range qt {
		qt[i] = float32(rng.NormFloat64())
	}
}

// refill returns orthonormalize's refill for the Q of segment seg of key
// at call: fresh normal draws for a column that went to zero, from a PCG
// of its own, so every rank draws the same.
func (p *powerSGD) refill(key, seg, call int) func(i int, row []float64) {
	return func(i int, row []float64) {
		rng := rand.New(rand.NewPCG(p.cfg.Seed, mix(uint64(key), uint64(seg), uint64(call), uint64(i)+1)))
		for k := range row {
			row[k] = rng.NormFloat64()
		}
	}
}

// mix hashes its arguments into one PCG stream selector (splitmix64's
// finaliser, chained).
func mix(xs ...uint64) uint64 {
	var h uint64 = 0x9e3779b97f4a7c15
	for _, x := range xs {
		h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

func finite(xs []float32) bool {
	for _, x := range xs {
		if x-x != 0 { // NaN - NaN and Inf - Inf are NaN
			return false
		}
	}
	return true
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// installGEMM puts gemm's kernels behind blas32 once.
var installGEMM sync.Once

// sgemm is blas32's Sgemm on raw row-major slices, with gemm's fast
// kernels installed behind blas32 at the first product unless the program
// chose an implementation of its own.
func sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	installGEMM.Do(func() {
		if _, plain := blas32.Implementation().(gonum.Implementation); plain {
			blas32.Use(gemm.Implementation{})
		}
	})
	blas32.Implementation().Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// state returns key's state, made at its first call from buf and segs
// and checked against them at the later ones.
func (p *powerSGD) state(key int, buf []float32, segs []Segment) (*powerKey, error) {
	if st, ok := p.keys[key]; ok {
		if st.size != len(buf) || !slices.Equal(st.segs, segs) {
			return nil, fmt.Errorf("powersgd key %d: %w: %d floats in %d segments, where its first call had %d in %d; give a new layout a new key (or a new codec)",
				key, ErrSegments, len(buf), len(segs), st.size, len(st.segs))
		}
		return st, nil
	}
	st, err := p.layout(len(buf), segs)
	if err != nil {
		return nil, fmt.Errorf("powersgd key %d: %w", key, err)
	}
	p.keys[key] = st
	return st, nil
}

// layout splits a bucket of size floats into its plain spans and its
// compressed matrices.
func (p *powerSGD) layout(size int, segs []Segment) (*powerKey, error) {
	st := &powerKey{size: size, segs: slices.Clone(segs), fresh: true}
	order := make([]int, len(segs))
	for i, s := range segs {
		if s.Off < 0 || s.Rows < 0 || s.Cols < 0 || s.Off > size ||
			(s.Rows > 0 && s.Cols > (size-s.Off)/s.Rows) {
			return nil, fmt.Errorf("%w: segment %d (%d x %d at %d) does not fit a bucket of %d floats", ErrSegments, i, s.Rows, s.Cols, s.Off, size)
		}
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return segs[a].Off - segs[b].Off })
	at, nq := 0, 0
	for k, i := range order {
		s := segs[i]
		if s.Off < at {
			return nil, fmt.Errorf("%w: segment %d (%d x %d at %d) overlaps segment %d, which ends at %d", ErrSegments, i, s.Rows, s.Cols, s.Off, order[k-1], at)
		}
		st.addPlain(at, s.Off-at)
		at = s.Off + s.Len()
		if p.rank(s) == 0 {
			st.addPlain(s.Off, s.Len())
		}
	}
	st.addPlain(at, size-at)
	roff := 0
	for i, s := range segs {
		if r := p.rank(s); r > 0 {
			st.work = max(st.work, r*max(s.Rows, s.Cols))
			st.mats = append(st.mats, lowRank{seg: i, off: s.Off, n: s.Rows, m: s.Cols, r: r, roff: roff, poff: st.nP, qoff: nq})
			roff += s.Len()
			st.nP += r * s.Rows
			nq += r * s.Cols
		}
	}
	st.q = make([]float32, nq)
	return st, nil
}

// rank is the rank s is approximated at, 0 if it is sent plain: a
// vector, or a matrix that compression would not shrink MinCompression
// times.
func (p *powerSGD) rank(s Segment) int {
	r := min(s.Rows, s.Cols, p.cfg.Rank)
	if s.Rows < 2 || s.Cols < 2 || !(p.cfg.MinCompression*float64((s.Rows+s.Cols)*r) < float64(s.Len())) {
		return 0
	}
	return r
}

// addPlain adds [off, off+n) to the plain spans, merged with the last.
func (st *powerKey) addPlain(off, n int) {
	if n == 0 {
		return
	}
	st.nPlain += n
	if k := len(st.plain) - 1; k >= 0 && st.plain[k].off+st.plain[k].n == off {
		st.plain[k].n += n
		return
	}
	st.plain = append(st.plain, span{off, n})
}
