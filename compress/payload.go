package compress

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// The wire formats of the sparse, sign and QSGD codecs. Every number is
// little-endian. A payload says nothing of its own length or kind: both
// ends know n (the bucket's length) and the codec's parameters, and a
// decoder checks the payload against them.
//
// A scale (sign's mean magnitude, QSGD's norm) is a finite float32 that
// is not negative, or the quiet NaN 0x7fc00000 (NaNScale) that an
// encoder writes for a vector with a NaN or an Inf: it decodes to a
// vector of NaNs, so that a non-finite gradient makes the sum non-finite
// on every rank, as an uncompressed all-reduce would, and a loss scaler
// sees it. Any other scale (negative, -0, an Inf, another NaN) is
// corrupt.
//
// Decoders add into dst and may have added part of the payload when they
// return an error; they never write outside dst and never panic.

// NaNScale is the bits of the scale that an encoder writes for a vector
// with a NaN or an Inf.
const NaNScale uint32 = 0x7fc00000

// validWireScale reports whether bits is a scale an encoder writes.
func validWireScale(bits uint32) bool { return bits < 0x7f800000 || bits == NaNScale }

// wireScale is the scale an encoder writes for s: NaNScale if s is not
// finite.
func wireScale(s float64) uint32 {
	f := float32(s)
	if s != s || math.IsInf(float64(f), 0) {
		return NaNScale
	}
	return math.Float32bits(f)
}

// SparseSize is the length of a sparse payload of k (index, value) pairs:
// 8k bytes, each pair a uint32 index then the float32 value.
func SparseSize(k int) int { return 8 * k }

// EncodeSparse writes into dst, SparseSize(len(idx)) bytes, the pairs
// (idx[j], p[idx[j]]). The indices must increase strictly and be below
// len(p); any float32 value goes.
func EncodeSparse(dst []byte, idx []uint32, p []float32) error {
	if len(dst) != SparseSize(len(idx)) {
		return fmt.Errorf("sparse payload: buffer of %d bytes for %d pairs, want %d", len(dst), len(idx), SparseSize(len(idx)))
	}
	prev := int64(-1)
	for j, i := range idx {
		if int64(i) <= prev || int64(i) >= int64(len(p)) {
			return fmt.Errorf("sparse payload: pair %d has index %d after %d, want increasing indices below %d", j, i, prev, len(p))
		}
		prev = int64(i)
		binary.LittleEndian.PutUint32(dst[8*j:], i)
		binary.LittleEndian.PutUint32(dst[8*j+4:], math.Float32bits(p[i]))
	}
	return nil
}

// AddSparse adds the pairs of payload, a sparse payload of k pairs, into
// dst: dst[index] += value. It fails with an error wrapping ErrCorrupt if
// the payload is not SparseSize(k) bytes or its indices do not increase
// strictly below len(dst).
func AddSparse(dst []float32, payload []byte, k int) error {
	if k < 0 || len(payload) != SparseSize(k) {
		return fmt.Errorf("%w: sparse payload of %d bytes, want %d pairs of 8", ErrCorrupt, len(payload), k)
	}
	prev := int64(-1)
	for j := 0; j < k; j++ {
		i := int64(binary.LittleEndian.Uint32(payload[8*j:]))
		if i <= prev || i >= int64(len(dst)) {
			return fmt.Errorf("%w: sparse pair %d has index %d after %d, want increasing indices below %d", ErrCorrupt, j, i, prev, len(dst))
		}
		prev = i
		dst[i] += math.Float32frombits(binary.LittleEndian.Uint32(payload[8*j+4:]))
	}
	return nil
}

// SignSize is the length of a sign payload of n elements: the float32
// scale, then the n sign bits packed 8 to a byte, element 8i+j in bit j
// of byte i, the unused high bits of the last byte zero.
func SignSize(n int) int { return 4 + (n+7)/8 }

// EncodeSign writes into dst, SignSize(len(p)) bytes, scale (NaNScale if
// it is not a finite number >= 0) and the signs of p: bit 1 for p[i] < 0,
// 0 for p[i] >= 0, so sign(0) = sign(-0) = +1 (a NaN's bit is its sign
// bit).
func EncodeSign(dst []byte, scale float32, p []float32) error {
	if len(dst) != SignSize(len(p)) {
		return fmt.Errorf("sign payload: buffer of %d bytes for %d elements, want %d", len(dst), len(p), SignSize(len(p)))
	}
	encodeSign(dst, scale, p, nil)
	return nil
}

// encodeSign is EncodeSign, given a dst of the right length, that also
// writes p[i] - scale·sign(p[i]) to res[i] if res is not nil.
func encodeSign(dst []byte, scale float32, p, res []float32) {
	sb := math.Float32bits(scale)
	if !(scale >= 0) || math.IsInf(float64(scale), 0) {
		sb = NaNScale
	}
	sb &^= 1 << 31 // +0, not -0
	binary.LittleEndian.PutUint32(dst, sb)
	sv := [2]float32{math.Float32frombits(sb), -math.Float32frombits(sb)}
	bits := dst[4:]
	full := len(p) / 8
	for i := 0; i < full; i++ {
		q := p[8*i : 8*i+8 : 8*i+8]
		var b uint32
		if res == nil {
			for j, x := range q {
				b |= negBit(x) << j
			}
		} else {
			r := res[8*i : 8*i+8 : 8*i+8]
			for j, x := range q {
				nb := negBit(x)
				b |= nb << j
				r[j] = x - sv[nb&1]
			}
		}
		bits[i] = byte(b)
	}
	if tail := p[8*full:]; len(tail) > 0 {
		var b uint32
		for j, x := range tail {
			nb := negBit(x)
			b |= nb << j
			if res != nil {
				res[8*full+j] = x - sv[nb&1]
			}
		}
		bits[full] = byte(b)
	}
}

// negBit is x's sign bit, but 0 for -0: 1 if x < 0 (or x is a NaN with
// the sign bit set), without a branch.
func negBit(x float32) uint32 {
	u := math.Float32bits(x)
	nonzero := (u&^(1<<31) + 0x7fffffff) >> 31
	return u >> 31 & nonzero
}

// AddSign adds the vector that payload, a sign payload of len(dst)
// elements, encodes into dst: dst[i] += ±scale. It fails with an error
// wrapping ErrCorrupt if the payload is not SignSize(len(dst)) bytes, its
// scale is invalid or an unused bit is set.
func AddSign(dst []float32, payload []byte) error {
	n := len(dst)
	if len(payload) != SignSize(n) {
		return fmt.Errorf("%w: sign payload of %d bytes, want %d for %d elements", ErrCorrupt, len(payload), SignSize(n), n)
	}
	sb := binary.LittleEndian.Uint32(payload)
	if !validWireScale(sb) {
		return fmt.Errorf("%w: sign payload's scale is %v (bits %#08x), want a finite number >= 0", ErrCorrupt, math.Float32frombits(sb), sb)
	}
	bits := payload[4:]
	if r := n % 8; r != 0 && bits[len(bits)-1]>>r != 0 {
		return fmt.Errorf("%w: sign payload's last byte %#02x sets bits past element %d", ErrCorrupt, bits[len(bits)-1], n)
	}
	full := n / 8
	for i := 0; i < full; i++ {
		d := dst[8*i : 8*i+8 : 8*i+8]
		b := uint32(bits[i])
		for j := range d {
			d[j] += math.Float32frombits(sb | (b>>j&1)<<31)
		}
	}
	for j := range n - 8*full {
		dst[8*full+j] += math.Float32frombits(sb | (uint32(bits[full])>>j&1)<<31)
	}
	return nil
}

// MaxQSGDLevels is the most levels a QSGD payload can carry: a byte is a
// sign bit and a 7-bit level.
const MaxQSGDLevels = 127

// QSGDSize is the length of a QSGD payload of n elements: the float32
// norm, then a byte per element, the sign in bit 7 (1 for negative) and
// the level 0..s below it. Level 0 has sign bit 0.
func QSGDSize(n int) int { return 4 + n }

// EncodeQSGD writes into dst, QSGDSize(len(g)) bytes, the QSGD
// quantisation of g with s levels (Alistarh et al. 2017): the norm
// ||g||₂ and, for each element, its sign and a level ξ in 0..s drawn so
// that E[ξ] = s·|g[i]|/norm (stochastic rounding of s·|g[i]|/norm to one
// of the two levels around it), which decodes to sign·norm·ξ/s, an
// unbiased estimate of g[i]. It draws 32 random bits an element from rng,
// a 64-bit draw for each two elements in order, the low half first. A g with a NaN or an Inf, or whose norm overflows
// float32, gets the norm NaNScale and level 0 everywhere.
func EncodeQSGD(dst []byte, s int, g []float32, rng *rand.PCG) error {
	if s < 1 || s > MaxQSGDLevels {
		return fmt.Errorf("qsgd payload: %d levels, want 1 to %d", s, MaxQSGDLevels)
	}
	if len(dst) != QSGDSize(len(g)) {
		return fmt.Errorf("qsgd payload: buffer of %d bytes for %d elements, want %d", len(dst), len(g), QSGDSize(len(g)))
	}
	nb := wireScale(math.Sqrt(sumSquares(g)))
	binary.LittleEndian.PutUint32(dst, nb)
	lv := dst[4:]
	norm := float64(math.Float32frombits(nb))
	if nb == NaNScale || norm == 0 {
		clear(lv)
		return nil
	}
	quantise(lv, float64(s)/norm, s, g, rng)
	return nil
}

// quantise writes the level bytes of g, without a branch on the data:
// x = |g[i]|·f, its integer part l, then l+1 if u < frac(x)·2³², u the
// element's 32 random bits (the low half of a 64-bit draw first), at most
// s; and the sign bit if the level is not 0.
func quantise(lv []byte, f float64, s int, g []float32, rng *rand.PCG) {
	lv = lv[:len(g)]
	var u uint64
	for i, x := range g {
		if i&1 == 0 {
			u = rng.Uint64()
		} else {
			u >>= 32
		}
		v := math.Abs(float64(x)) * f
		l := int64(v) // v >= 0: the integer part
		d := float64(uint32(u)) - (v-float64(l))*(1<<32)
		l += int64(math.Float64bits(d) >> 63) // 1 if u < frac·2³²
		q := uint32(min(l, int64(s)))
		neg := math.Float32bits(x) >> 31
		lv[i] = byte(q | (q+0x7f)&(neg<<7)) // q+0x7f has bit 7 iff q >= 1
	}
}

// sumSquares is the sum of g's squares in float64, in four interleaved
// sums (no float32 overflow; NaN or +Inf if g has a NaN or an Inf).
func sumSquares(g []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(g); i += 4 {
		q := g[i : i+4 : i+4]
		a, b, c, d := float64(q[0]), float64(q[1]), float64(q[2]), float64(q[3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for _, x := range g[i:] {
		s0 += float64(x) * float64(x)
	}
	return s0 + s1 + s2 + s3
}

// AddQSGD adds the vector that payload, a QSGD payload of len(dst)
// elements with s levels, encodes into dst: dst[i] += sign·norm·ξ/s, each
// value rounded once to float32. It fails with an error wrapping
// ErrCorrupt if the payload is not QSGDSize(len(dst)) bytes, its norm is
// invalid, or a level is above s or is a signed 0; and with a plain error
// if s is not in 1..MaxQSGDLevels.
func AddQSGD(dst []float32, payload []byte, s int) error {
	if s < 1 || s > MaxQSGDLevels {
		return fmt.Errorf("qsgd payload: %d levels, want 1 to %d", s, MaxQSGDLevels)
	}
	n := len(dst)
	if len(payload) != QSGDSize(n) {
		return fmt.Errorf("%w: qsgd payload of %d bytes, want %d for %d elements", ErrCorrupt, len(payload), QSGDSize(n), n)
	}
	nb := binary.LittleEndian.Uint32(payload)
	if !validWireScale(nb) {
		return fmt.Errorf("%w: qsgd payload's norm is %v (bits %#08x), want a finite number >= 0", ErrCorrupt, math.Float32frombits(nb), nb)
	}
	var tab [256]float32
	norm := float64(math.Float32frombits(nb))
	for l := 0; l <= s; l++ {
		v := float32(norm * float64(l) / float64(s))
		tab[l], tab[l|0x80] = v, -v
	}
	tab[0x80] = 0 // a signed 0 is corrupt; its entry is never used
	for i, b := range payload[4:] {
		if l := b & 0x7f; int(l) > s || b == 0x80 {
			return fmt.Errorf("%w: qsgd element %d has byte %#02x, want a level 0 to %d (level 0 unsigned)", ErrCorrupt, i, b, s)
		}
		dst[i] += tab[b]
	}
	return nil
}
