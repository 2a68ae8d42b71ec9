package compress

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// NewTopK returns the top-k codec, "topk:<frac>": each step it sends, of
// p = gradient + residual, the k = max(1, ⌈frac·n⌉) elements of largest
// magnitude of each n-element bucket, and keeps the rest as the bucket's
// residual (error feedback, Residuals): what it sends plus the new
// residual is p exactly, bit for bit. frac is in (0, 1].
//
// Selection takes O(n) time, a radix select on the magnitudes' bits,
// whatever the data. Of elements of equal magnitude, the lower index goes
// first. A NaN is larger than any number and an Inf larger than any
// finite one, so a bucket with NaNs or Infs sends some of them, the sum
// is not finite on every rank, and a loss scaler sees the overflow; such
// a step also leaves the residual as it was, as the optimizer throws its
// gradient away.
//
// The ranks exchange their k (index, value) pairs (SparseSize, an
// all-gather) and each rank adds every rank's pairs, in rank order, into
// a zeroed bucket, so that every rank has the same bits. But the
// all-gather brings (p-1)·8k bytes to each of p ranks where a ring
// all-reduce of the dense vector brings 2·(p-1)/p·4n, so where p·k >= n
// the codec all-reduces the bucket with everything but the k elements
// zeroed instead (prims.AllReduce, which also gives every rank the same
// bits). Stats.Sent is 8k bytes, or 4n when it went dense.
func NewTopK(frac float64) (Codec, error) {
	if err := checkFrac("topk", frac); err != nil {
		return nil, err
	}
	return &topK{frac: frac, name: "topk:" + formatFrac(frac)}, nil
}

// topK is the top-k codec.
type topK struct {
	frac float64
	name string
	ef   Residuals
	sel  selector
	idx  []uint32
	wire []byte
	g    gatherer
}

func (t *topK) Name() string { return t.name + t.g.suffix() }

func (t *topK) AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, _ []Segment) (Stats, error) {
	n := len(buf)
	st := Stats{Raw: 4 * int64(n)}
	if n == 0 {
		return st, nil
	}
	if int64(n) > math.MaxUint32 {
		return st, fmt.Errorf("%s: bucket %d has %d elements, more than the 32-bit indices of a sparse payload can address: use smaller buckets", t.name, key, n)
	}
	res, err := t.ef.Apply(key, buf)
	if err != nil {
		return st, fmt.Errorf("%s: %w", t.name, err)
	}
	k := kOf(t.frac, n)
	var finite bool
	t.idx, finite = t.sel.top(buf, k, t.idx[:0])
	if finite {
		copy(res, buf)
		for _, i := range t.idx {
			res[i] = 0
		}
	}
	p := c.Size()
	if p*k >= n {
		st.Sent = 4 * int64(n)
		keepOnly(buf, t.idx)
		if err := prims.AllReduce(ctx, c, buf, prims.Sum[float32]()); err != nil {
			return st, fmt.Errorf("%s: bucket %d: %w", t.name, key, err)
		}
		return st, nil
	}
	sent, err := t.exchange(ctx, c, key, buf, k)
	st.Sent = int64(sent)
	return st, err
}

// exchange all-gathers the pairs of t.idx and sums them into buf; it
// returns the bytes this rank sent.
func (t *topK) exchange(ctx context.Context, c *spmd.Comm, key int, buf []float32, k int) (int, error) {
	sz, p := SparseSize(k), c.Size()
	wire := reuse(&t.wire, p*sz)
	send := wire[c.Rank()*sz : (c.Rank()+1)*sz]
	if err := EncodeSparse(send, t.idx, buf); err != nil {
		return 0, fmt.Errorf("%s: bucket %d: %w", t.Name(), key, err)
	}
	sent, err := t.g.gather(ctx, c, key, send, wire)
	if err != nil {
		return sent, fmt.Errorf("%s: bucket %d: %w", t.Name(), key, err)
	}
	clear(buf)
	for r := range p {
		if err := AddSparse(buf, wire[r*sz:(r+1)*sz], k); err != nil {
			return sent, fmt.Errorf("%s: bucket %d: rank %d's payload: %w", t.Name(), key, r, err)
		}
	}
	return sent, nil
}

// keepOnly zeroes the elements of buf whose indices are not in idx,
// which increases.
func keepOnly(buf []float32, idx []uint32) {
	next := 0
	for _, i := range idx {
		clear(buf[next:i])
		next = int(i) + 1
	}
	clear(buf[next:])
}

// selector finds the k elements of largest magnitude of a vector: a
// radix select on the magnitudes' bits (a float32's bits less the sign,
// whose order as integers is the magnitudes' order, NaNs above +Inf). It
// keeps its histograms and the candidates' indices between calls.
type selector struct {
	h    [4][1 << 11]uint32 // four, so that runs of one bin don't wait on each other
	cand []uint32
}

// top appends to idx, in increasing order, the indices of the k elements
// of p of largest magnitude (all of them if k >= len(p)): every element of
// magnitude above the k-th largest, then those equal to it lowest index
// first. NaNs rank above Infs, Infs above numbers. finite reports whether
// p has no NaN and no Inf.
//
// It reads p twice: to histogram the top 11 bits of the magnitudes,
// which finds the bin of the k-th largest, and to collect the indices of
// the elements in that bin or above it. The next 10 and the last 10 bits
// of the candidates in the bin narrow it down to the k-th largest.
func (s *selector) top(p []float32, k int, idx []uint32) (_ []uint32, finite bool) {
	k = min(k, len(p))
	if k <= 0 {
		return idx, finiteAll(p)
	}
	h := s.histogram(p)
	finite = nonFiniteCount(h) == 0
	rem := uint32(k) // how many to take from the k-th's bin
	b := len(h) - 1
	for h[b] < rem {
		rem -= h[b]
		b--
	}
	lo := uint32(b) << 20
	s.cand = reuse(&s.cand, k-int(rem)+int(h[b]))[:0]
	for i, x := range p {
		if math.Float32bits(x)&^(1<<31) >= lo {
			s.cand = append(s.cand, uint32(i))
		}
	}
	hi := lo | (1<<20 - 1)
	if h[b] != rem {
		lo, hi, rem = s.narrow(p, lo, hi, rem)
	}
	for _, i := range s.cand {
		m := math.Float32bits(p[i]) &^ (1 << 31)
		if m > hi {
			idx = append(idx, i)
		} else if m >= lo && rem > 0 {
			idx = append(idx, i)
			rem--
		}
	}
	return idx, finite
}

// histogram counts the top 11 bits of p's magnitudes.
func (s *selector) histogram(p []float32) []uint32 {
	for j := range s.h {
		clear(s.h[j][:])
	}
	h0, h1, h2, h3 := &s.h[0], &s.h[1], &s.h[2], &s.h[3]
	i := 0
	for ; i+4 <= len(p); i += 4 {
		q := p[i : i+4 : i+4]
		h0[math.Float32bits(q[0])>>20&0x7ff]++
		h1[math.Float32bits(q[1])>>20&0x7ff]++
		h2[math.Float32bits(q[2])>>20&0x7ff]++
		h3[math.Float32bits(q[3])>>20&0x7ff]++
	}
	for _, x := range p[i:] {
		h0[math.Float32bits(x)>>20&0x7ff]++
	}
	for j := range h0 {
		h0[j] += h1[j] + h2[j] + h3[j]
	}
	return h0[:]
}

// narrow finds, among the candidates whose magnitudes are in [lo, hi],
// the rem-th largest by the next 10 bits and then the last 10: it
// returns the range of magnitudes to take rem of, lowest index first,
// after taking every candidate above hi.
func (s *selector) narrow(p []float32, lo, hi, rem uint32) (_, _, _ uint32) {
	h := s.h[0][:1<<10]
	for _, shift := range []uint32{10, 0} {
		clear(h)
		for _, i := range s.cand {
			if m := math.Float32bits(p[i]) &^ (1 << 31); m >= lo && m <= hi {
				h[m>>shift&(1<<10-1)]++
			}
		}
		b := len(h) - 1
		for h[b] < rem {
			rem -= h[b]
			b--
		}
		lo |= uint32(b) << shift
		hi = lo | (1<<shift - 1)
		if h[b] == rem { // the whole bin goes
			break
		}
	}
	return lo, hi, rem
}

// nonFiniteCount is the count of NaNs and Infs in a histogram of the top
// 11 bits of magnitudes: those whose exponent bits are all ones.
func nonFiniteCount(h []uint32) uint32 {
	var c uint32
	for _, n := range h[0x7f800000>>20:] {
		c += n
	}
	return c
}

// NewRandomK returns the random-k codec, "randk:<frac>": each step it
// sends, of p = gradient + residual, k = max(1, ⌈frac·n⌉) elements of each
// n-element bucket chosen uniformly at random, and keeps the rest as the
// residual, as top-k does (NewTopK: sent plus residual is p bit for bit,
// and NaNs or Infs skip the step; here they make every sent value NaN).
// Every rank draws the same k indices, from a PCG seeded by seed, the
// bucket key and the number of steps of that key so far, so no index
// goes on the wire: the ranks all-reduce (sum) the k values, and
// Stats.Sent is 4k bytes. frac is in (0, 1].
func NewRandomK(frac float64, seed uint64) (Codec, error) {
	if err := checkFrac("randk", frac); err != nil {
		return nil, err
	}
	return &randomK{frac: frac, seed: seed, name: "randk:" + formatFrac(frac)}, nil
}

// randomK is the random-k codec.
type randomK struct {
	frac  float64
	seed  uint64
	name  string
	ef    Residuals
	steps map[int]uint64
	seen  []uint64 // a bit per element, zero between calls
	idx   []uint32
	vals  []float32
}

func (r *randomK) Name() string { return r.name }

func (r *randomK) AllReduce(ctx context.Context, c *spmd.Comm, key int, buf []float32, _ []Segment) (Stats, error) {
	n := len(buf)
	st := Stats{Raw: 4 * int64(n)}
	if n == 0 {
		return st, nil
	}
	res, err := r.ef.Apply(key, buf)
	if err != nil {
		return st, fmt.Errorf("%s: %w", r.name, err)
	}
	if r.steps == nil {
		r.steps = make(map[int]uint64)
	}
	step := r.steps[key]
	r.steps[key]++
	k := kOf(r.frac, n)
	rng := randkRand(r.seed, key, step)
	r.idx = sampleK(rng, n, k, reuse(&r.seen, (n+63)/64), r.idx[:0])
	vals := reuse(&r.vals, k)
	for j, i := range r.idx {
		vals[j] = buf[i]
	}
	if finiteAll(buf) {
		copy(res, buf)
		for _, i := range r.idx {
			res[i] = 0
		}
	} else {
		for j := range vals {
			vals[j] = float32(math.NaN())
		}
	}
	st.Sent = 4 * int64(k)
	if err := prims.AllReduce(ctx, c, vals, prims.Sum[float32]()); err != nil {
		return st, fmt.Errorf("%s: bucket %d: %w", r.name, key, err)
	}
	clear(buf)
	for j, i := range r.idx {
		buf[i] = vals[j]
	}
	return st, nil
}

// randkRand is the random source of random-k's indices of a key's
// step-th bucket, the same on every rank.
func randkRand(seed uint64, key int, step uint64) *rand.Rand {
	return rand.New(pcgFor(seed, uint64(key), step))
}

// sampleK appends to idx, in increasing order, k distinct indices below n
// drawn uniformly (Floyd's algorithm), using seen, (n+63)/64 zero words,
// as the set; it leaves seen zero.
func sampleK(rng *rand.Rand, n, k int, seen []uint64, idx []uint32) []uint32 {
	for j := n - k; j < n; j++ {
		t := int(rng.Uint64N(uint64(j) + 1))
		if seen[t/64]>>(t%64)&1 != 0 {
			t = j
		}
		seen[t/64] |= 1 << (t % 64)
	}
	for w, word := range seen {
		for word != 0 {
			idx = append(idx, uint32(w*64+bits.TrailingZeros64(word)))
			word &= word - 1
		}
		seen[w] = 0
	}
	return idx
}

// finiteAll reports whether p has no NaN and no Inf.
func finiteAll(p []float32) bool {
	var bad uint32
	for _, x := range p {
		bad |= math.Float32bits(x)&0x7f800000 + 0x00800000 // carries into bit 31 iff the exponent is all ones
	}
	return bad>>31 == 0
}

// pcgFor is a PCG seeded by seed and words, mixed by SplitMix64 so that
// nearby words give unrelated streams.
func pcgFor(seed uint64, words ...uint64) *rand.PCG {
	h := splitMix64(seed)
	for _, w := range words {
		h = splitMix64(h ^ w)
	}
	return rand.NewPCG(seed, h)
}

// splitMix64 is SplitMix64's output function of x + the golden gamma.
func splitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// kOf is max(1, ⌈frac·n⌉), at most n; the product is taken with a
// relative tolerance of 1e-9, so that 0.07 of 100 is 7, not 8.
func kOf(frac float64, n int) int {
	x := frac * float64(n)
	return min(n, max(1, int(math.Ceil(x-x*1e-9))))
}

// checkFrac checks a codec's fraction argument.
func checkFrac(codec string, frac float64) error {
	if !(frac > 0 && frac <= 1) {
		return fmt.Errorf("%s: fraction %v out of range: want a fraction of each bucket in (0, 1], such as %s:0.01", codec, frac, codec)
	}
	return nil
}

// formatFrac writes frac as the shortest decimal that reads back as it.
func formatFrac(frac float64) string { return strconv.FormatFloat(frac, 'g', -1, 64) }

// reuse returns (*s)[:n], reallocating *s if it is too short.
func reuse[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	return (*s)[:n]
}
